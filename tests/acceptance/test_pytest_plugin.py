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
    env = dict(os.environ, CLAIMCHECK_DSN=server.dsn)
    env.pop("PYTEST_XDIST_WORKER", None)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=PYTEST_TIMEOUT_S)


def test_safe_claim_passes_under_xdist(server, tmp_path):
    # Two xdist workers, one server: each call works in a schema of its own.
    done = run_user_suite(server, tmp_path, (SCENARIOS / "skip_locked.sql").read_text(), 4, 1_000, "-n", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout


def test_unsafe_claim_fails_with_the_evidence(server, tmp_path):
    done = run_user_suite(server, tmp_path, (SCENARIOS / "naive_subquery.sql").read_text(), 8, 2_000,
                          "-k", "lease")
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout
    assert "sql/claim.sql is not exactly-once" in out and "handed to more than one worker" in out
    assert "worker w" in out and "attempt 1" in out and "attempt 2" in out and "claimed +" in out
