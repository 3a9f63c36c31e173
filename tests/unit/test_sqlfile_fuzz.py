"""A fuzz of strategy files built from the contract's pieces (issue 25): see tests/sqlfile_fuzz.py.
A few hundred files are read here; tests/integration/test_sqlfile_fuzz_runs.py runs a few on a server."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from fuzz_counts import count_example
from pg_claimcheck.contract.strategy import load_strategy
from pg_claimcheck.errors import SqlFileError, UsageError
from sqlfile_fuzz import files


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(example=files())
def test_a_file_is_read_exactly_when_the_contract_allows_it(tmp_path_factory, example, request):
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
    count_example(request, "sql file fuzz: examples by outcome", "refused" if refused else "read")
