"""A few strategy files of the SQL-file fuzz (tests/sqlfile_fuzz.py) that the contract's reading
allows, run through the CLI on a real server: one only the server can refuse ends in exit 2 before
any worker starts, never in a verdict; any other in 0 or 1, within its limits, without a traceback."""
from __future__ import annotations

import contextlib
import io

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzz_counts import count_example
from sqlfile_fuzz import files


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(example=files().filter(lambda f: not f[1]), mode=st.sampled_from(["lease", "lock"]))
def test_a_run_of_a_file_the_server_refuses_is_exit_2_and_of_any_other_0_or_1(server, tmp_path_factory, example,
                                                                              mode, request):
    from pg_claimcheck.cli import main

    text, _, server_bad = example
    path = tmp_path_factory.mktemp("r") / "fuzz.sql"
    path.write_text(text)
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(["check", str(path), "--jobs", "30", "--workers", "2", "--mode", mode, "--dsn", server.dsn])
    said = " ".join(err.getvalue().split())
    assert "Traceback" not in said, (text, said)
    assert code == (2 if server_bad else code) and code in ((2,) if server_bad else (0, 1)), (text, code, said)
    count_example(request, "sql file fuzz runs: examples by exit code", f"run exit {code}")
