# Two commands on a fresh machine: `make bench` and `make test`; `make quick` runs the unit layer alone.
# Both create the virtualenv themselves; it is rebuilt when pyproject.toml changes.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: bench test quick clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

bench: $(STAMP)
	$(BIN)/claimcheck bench

# worksteal: an idle xdist worker takes tests queued on the other, so one long test near the end
# does not leave a core idle.
test: $(STAMP)
	$(BIN)/pytest -n 2 --dist worksteal

# The unit layer: pure logic, no server, under a minute.
quick: $(STAMP)
	$(BIN)/pytest -q tests/unit

clean:
	rm -rf $(VENV) reports/*.json reports/*.html
