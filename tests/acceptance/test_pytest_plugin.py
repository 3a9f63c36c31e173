"""The pytest plugin as a user's CI runs it: their test file, their SQL, pytest in a subprocess."""
import os
import subprocess
import sys
from pathlib import Path

SCENARIOS = Path(__file__).parents[2] / "scenarios"
USER_TEST = '''
import pytest

@pytest.mark.parametrize("mode", ["lease", "lock"])
def test_claim_is_exactly_once(claimcheck, mode):
    claimcheck.assert_exactly_once("sql/claim.sql", workers={workers}, jobs={jobs}, mode=mode)
'''
PYTEST_TIMEOUT_S = 180


def run_user_suite(server, tmp_path, claim_sql: str, workers: int, jobs: int, *args: str):
    (tmp_path / "sql").mkdir()
    (tmp_path / "sql" / "claim.sql").write_text(claim_sql)
    (tmp_path / "test_queue.py").write_text(USER_TEST.format(workers=workers, jobs=jobs))
    # A user project with packages of its own named like our repository's folders must not shadow ours.
    for own in ("scenarios", "harness"):
        (tmp_path / own).mkdir()
        (tmp_path / own / "__init__.py").write_text("MINE = True\n")
    env = dict(os.environ, CLAIMCHECK_DSN=server.dsn)
    env.pop("PYTEST_XDIST_WORKER", None)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=PYTEST_TIMEOUT_S)


def test_safe_claim_passes_under_xdist(server, tmp_path):
    # Two xdist workers, one server: each call works in a schema of its own (200 jobs a call show it as 1,000 did).
    done = run_user_suite(server, tmp_path, (SCENARIOS / "skip_locked.sql").read_text(), 4, 200, "-n", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout


def test_unsafe_claim_fails_with_the_evidence(server, tmp_path):
    done = run_user_suite(server, tmp_path, (SCENARIOS / "naive_subquery.sql").read_text(), 8, 2_000,
                          "-k", "lease")
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout
    assert "EXACTLY-ONCE VIOLATED: " in out and "sql/claim.sql is not exactly-once" in out
    assert "handed to more than one worker" in out
    assert "worker w" in out and "attempt 1" in out and "attempt 2" in out and "claimed +" in out
    # Printed once: no chained "During handling of the above exception" repeating the evidence.
    # (pytest's short summary at the end repeats the message's first line: count above it.)
    failures = out.split("short test summary info")[0]
    assert failures.count("sql/claim.sql is not exactly-once") == 1 and "During handling" not in out


def test_public_api_from_a_plain_script(server, tmp_path):
    script = tmp_path / "use_api.py"
    script.write_text(
        "import pg_claimcheck\n"
        "from pg_claimcheck import RunResult, assert_exactly_once, run\n"
        f"result = run('skip-locked', workers=2, jobs=200, dsn={server.dsn!r})\n"
        "assert isinstance(result, RunResult) and result.exactly_once\n"
        "try:\n"
        f"    assert_exactly_once('naive-subquery', workers=8, jobs=2000, dsn={server.dsn!r})\n"
        "except AssertionError as exc:\n"
        "    print('violated:', str(exc).splitlines()[0])\n"
        "print('version', pg_claimcheck.__version__)\n")
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=PYTEST_TIMEOUT_S)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "naive_subquery.sql is not exactly-once" in done.stdout
    assert "version 0" in done.stdout


NO_PROGRESS_TEST = '''
def test_claim_is_exactly_once(claimcheck):
    claimcheck.assert_exactly_once("sql/claim.sql", workers=2, jobs=20, duration_s=1, plans="none")
'''


def test_a_queue_that_makes_no_progress_fails_as_such_not_as_a_violation(server, tmp_path):
    """Safety and liveness apart in the plugin (issue 31, item 6): a claim that never takes a job is
    reported NO PROGRESS with its cause, never as an exactly-once violation."""
    (tmp_path / "sql").mkdir()
    (tmp_path / "sql" / "claim.sql").write_text("-- name: claim\nSELECT id, attempts FROM jobs WHERE false;\n")
    (tmp_path / "test_queue.py").write_text(NO_PROGRESS_TEST)
    env = dict(os.environ, CLAIMCHECK_DSN=server.dsn)
    env.pop("PYTEST_XDIST_WORKER", None)
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=PYTEST_TIMEOUT_S)
    assert done.returncode == 1, done.stdout + done.stderr
    out = " ".join(done.stdout.split())
    assert "NO PROGRESS (liveness, not a double claim)" in out and "no job was finished in the run's" in out
    assert "EXACTLY-ONCE VIOLATED" not in out
