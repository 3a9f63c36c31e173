"""The CLI options fuzz (issue 25), shared by tests/unit/test_cli_fuzz.py (a few hundred examples in
`make test`) and tests/benchmarks/fuzz_cli.py (thousands, out of band).

An example is a verb and a few `--option=value` pairs, each value drawn from valid numbers, the
bounds and just past them, NaN, infinities, huge numbers and garbage. `allowed` states
docs/contracts.md section 6 independently of the code; `outcome` runs the real CLI in process with
a DSN at a closed port, so input the contract allows must get as far as connecting (the point a run
would start) and input it does not allow must be refused before: exit 2 either way, no traceback.
"""
from __future__ import annotations

import contextlib
import io
import math

from hypothesis import strategies as st

NO_SERVER = "postgresql://nobody@127.0.0.1:1/none"
REACHED_THE_SERVER = "cannot connect to PostgreSQL"

DAY, MINUTE_MS = 86_400.0, 60_000.0
# option -> (kind, low, high, low is excluded)
RUN_OPTIONS = {
    "--workers": ("ints", 1, 64, False), "--jobs": ("int", 1, 1_000_000, False),
    "--batch": ("ints", 1, 10_000, False), "--poll-ms": ("float", 0, MINUTE_MS, False),
    "--lease-seconds": ("float", 0, DAY, True), "--duration": ("float", 0, DAY, True),
    "--claims-per-worker": ("int", 1, 100_000_000, False), "--fail-rate": ("float", 0, 1, False),
    "--backoff-unit": ("float", 0, DAY, False), "--backoff-cap": ("float", 0, DAY, False),
    "--reap-every": ("float", 0, DAY, True), "--work-ms": ("work", 0, MINUTE_MS, False),
    "--mode": ("modes", None, None, False),
}
VERB_OPTIONS = {
    "check": {**RUN_OPTIONS, "--max-examples": ("int", 1, 100_000, False)},
    "bench": {**RUN_OPTIONS, "--repeat": ("int", 1, 100, False)},
    "faults": {**RUN_OPTIONS, **{f"--{k}": ("int", 0, 32, False) for k in ("kills", "terminates", "stalls",
                                                                            "restarts")}},
}
VERB_ARGS = {"check": ["check", "skip-locked"], "bench": ["bench", "--strategies", "skip-locked"],
             "faults": ["faults"]}

_numbers = st.one_of(
    st.integers(-3, 70), st.sampled_from([0, 1, 32, 33, 64, 65, 100, 101, 10_000, 10_001, 60_000, 60_001,
                                          86_400, 86_401, 100_000, 100_001, 1_000_000, 1_000_001,
                                          100_000_000, 100_000_001, 99_999_999_999]),
    st.floats(-10, 100_000, allow_nan=False), st.sampled_from([0.5, 0.999, 1.0, 86_400.5, 60_000.5, 1e-300]))
_texts = st.one_of(
    _numbers.map(str),
    st.sampled_from(["nan", "NaN", "inf", "-inf", "Infinity", "1e400", "-1e400", "", " ", "abc", "1e", "0x10",
                     "1_000", "5,", ",", "1,,2", "2,4", "1-10", "10-1", "exp:5", "exp:nan", "exp:-1",
                     "1-nan", "nan-1", "0-60000", "0-60001", "lease", "lock", "lease,lock", "queue", "-"]),
    st.lists(st.integers(-1, 70).map(str), min_size=2, max_size=3).map(",".join),
)


@st.composite
def examples(draw) -> tuple[str, dict[str, str], set[str]]:
    """(verb, {option: value}, flags)."""
    verb = draw(st.sampled_from(sorted(VERB_OPTIONS)))
    options = draw(st.dictionaries(st.sampled_from(sorted(VERB_OPTIONS[verb])), _texts, max_size=4))
    flags = set(draw(st.lists(st.sampled_from(["--faults", "--drain", "--search"]), max_size=2))) \
        if verb == "check" else set()
    return verb, options, flags


def argv(verb: str, options: dict[str, str], flags: set[str]) -> list[str]:
    return [*VERB_ARGS[verb], *(f"{k}={v}" for k, v in options.items()), *sorted(flags), "--dsn", NO_SERVER]


def _number(kind: str, text: str):
    if kind in ("int", "ints"):
        # An empty item (`5,`, `1,,2`) is refused: a number left out, or a comma too many (issue 35).
        values = [int(x) for x in text.split(",")] if kind == "ints" else [int(text)]
    else:
        values = [float(text)]
    if not values:
        raise ValueError(text)
    return values


def _work(text: str) -> list[float]:
    text = text.strip()
    if text.startswith("exp:"):
        return [float(text[4:])]
    if "-" in text.lstrip("-"):
        lo, hi = (float(x) for x in text.split("-", 1))
        if hi < lo:
            raise ValueError(text)
        return [lo, hi]
    return [float(text)]


def allowed(verb: str, options: dict[str, str], flags: set[str]) -> bool:
    """Does docs/contracts.md (section 6) allow this command line? Stated without the code's helpers."""
    for name, text in options.items():
        kind, low, high, open_low = VERB_OPTIONS[verb][name]
        if name == "--max-examples" and "--search" not in flags:
            try:  # parsed as a number, bounded only where a search reads it
                int(text)
                continue
            except ValueError:
                return False
        if kind == "modes":
            modes = [m.strip() for m in text.split(",") if m.strip()]
            if not modes or any(m not in ("lease", "lock") for m in modes) or (verb == "check" and len(modes) != 1):
                return False
            continue
        try:
            values = _work(text) if kind == "work" else _number(kind, text)
        except (ValueError, OverflowError):
            return False
        if kind == "ints" and verb == "check" and len(values) != 1:
            return False
        for value in values:
            if not math.isfinite(value) or value > high or value < low or (open_low and value == low):
                return False
            if name == "--fail-rate" and value == high:
                return False  # below 1
    return True


def outcome(args: list[str]) -> tuple[int, str]:
    """The CLI's exit code and stderr, in process."""
    from pg_claimcheck.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(args)
        except SystemExit as exc:  # argparse's own refusal (a value that is not a number)
            code = exc.code
    return code, " ".join(err.getvalue().split())


def check_example(verb: str, options: dict[str, str], flags: set[str]) -> str:
    """Assert the property for one example; return how it ended ('started' or 'refused')."""
    args = argv(verb, options, flags)
    code, err = outcome(args)
    assert code == 2, (args, code, err)  # no server: never a verdict
    assert "Traceback" not in err and "Error:" not in err.split("error:")[0], (args, err)
    started = REACHED_THE_SERVER in err
    assert started == allowed(verb, options, flags), (args, err)
    return "started" if started else "refused"
