"""A fuzz of strategy files built from the contract's pieces (issue 25): see tests/sqlfile_fuzz.py.
A few hundred files are read here; tests/integration/test_sqlfile_fuzz_runs.py runs a few on a server."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from claimcheck.contract.strategy import load_strategy
from claimcheck.errors import SqlFileError, UsageError
from sqlfile_fuzz import files

SEEN: dict[str, int] = {}


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(files())
def test_a_file_is_read_exactly_when_the_contract_allows_it(tmp_path_factory, example):
    text, defects, _ = example
    path = tmp_path_factory.mktemp("f") / "fuzz.sql"
    path.write_text(text)
    try:
        load_strategy(str(path))
        refused = None
    except (SqlFileError, UsageError) as exc:  # anything else (a traceback) fails the test
        refused = str(exc)
    assert (refused is not None) == bool(defects), (text, defects, refused)
    if refused:
        assert refused.startswith(str(path)), refused  # the file is named (and the line, where there is one)
    SEEN["refused" if refused else "read"] = SEEN.get("refused" if refused else "read", 0) + 1


def test_zz_report_the_spread(record_property):
    record_property("sql file fuzz: examples by outcome", dict(sorted(SEEN.items())))
