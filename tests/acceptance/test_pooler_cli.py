"""`--pooler pgbouncer`: the PgBouncer claimcheck starts is gone after Ctrl-C, and a SIGKILLed run's is
swept by the next run, like an embedded cluster (see pg_claimcheck.server.pgbouncer)."""
from __future__ import annotations

import os
import signal
import time

import psycopg
import pytest

from pg_claimcheck.errors import ServerError
from pg_claimcheck.server.pgbouncer import PgBouncer, PoolerSpec, pgbouncer_path

try:
    pgbouncer_path()
    MISSING = None
except ServerError:
    MISSING = "PgBouncer is not installed here (apt-get install pgbouncer; .ci/run installs it)"

pytestmark = pytest.mark.skipif(MISSING is not None, reason=MISSING or "")

LONG_RUN = ("check", "skip-locked", "--pooler", "pgbouncer", "--workers", "2", "--jobs", "100000", "--work-ms", "5")


def _started(cli, proc, timeout: float = 60):
    """The run's PgBouncer directory, once its workers claim through it (their backends, PgBouncer's
    server connections, carry the workers' names)."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(cli.server.dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            found = list(cli.scratch.glob("claimcheck-pgbouncer-*/pgbouncer.pid"))
            if found and conn.execute("SELECT 1 FROM pg_stat_activity WHERE application_name LIKE %s",
                                      (f"claimcheck/{cli.run_id}/w%",)).fetchone():
                return found[0].parent
            time.sleep(0.1)
    raise AssertionError("the run never claimed through its PgBouncer")


def test_ctrl_c_stops_the_pgbouncer_we_started_and_deletes_its_directory(cli):
    proc = cli.start(*LONG_RUN)
    left = _started(cli, proc)
    os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C reaches the whole process group
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    assert "the PgBouncer we started stopped" in " ".join(err.split()), err
    assert not left.exists(), err
    cli.assert_nothing_left()


def test_the_next_run_sweeps_a_killed_runs_pgbouncer(cli):
    proc = cli.start(*LONG_RUN)
    left = _started(cli, proc)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert left.exists()
    with psycopg.connect(cli.server.dsn, autocommit=True) as conn:  # as the server does once it notices
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE %s",
                     (f"claimcheck/{cli.run_id}/%",))
    killed, cli.run_id = cli.run_id, cli.run_id + "n"
    after = cli("check", "skip-locked", "--pooler", "pgbouncer", "--workers", "2", "--jobs", "100")
    assert after.code == 0, after.stderr
    assert f"swept {left}" in " ".join(after.stderr.split())
    cli.assert_nothing_left()
    cli.run_id = killed  # its schema was swept too, its PgBouncer stopped
    cli.assert_nothing_left()


def test_a_design_statement_pooling_cannot_run_is_refused_and_leaves_nothing(cli):
    refused = cli("check", "skip-locked", "--mode", "lock", "--pooler", "pgbouncer:statement", "--workers", "2",
                  "--jobs", "100")
    assert refused.code == 2, refused.stderr
    words = " ".join(refused.stderr.split())
    assert "skip-locked in lock mode cannot run behind PgBouncer" in words and "Traceback" not in words, words
    cli.assert_nothing_left()


def test_ctrl_c_through_a_statement_pool_given_as_the_dsn_leaves_nothing(cli):
    """Everything goes through the pool there, the cleanup too: its schema is dropped through it."""
    bouncer = PgBouncer(cli.server.dsn, PoolerSpec("statement"), 2)
    bouncer.start()
    try:
        proc = cli.start("check", "skip-locked", "--dsn", bouncer.dsn, "--plans", "none", "--workers", "2",
                         "--jobs", "100000", "--work-ms", "5")
        deadline = time.monotonic() + 60
        with psycopg.connect(cli.server.dsn, autocommit=True) as conn:
            while time.monotonic() < deadline:
                assert proc.poll() is None, proc.communicate()
                if conn.execute("SELECT to_regclass(%s)", (f"claimcheck_{cli.run_id}.jobs",)).fetchone()[0] and \
                        conn.execute(f"SELECT count(*) FROM claimcheck_{cli.run_id}.jobs WHERE status <> 'queued'"
                                     ).fetchone()[0]:
                    break
                time.sleep(0.1)
            else:
                raise AssertionError("the run never claimed through the statement pool")
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        bouncer.stop()
    assert proc.returncode == 2, err
    cli.assert_nothing_left()
