"""The worker's libpq fast path (pg_claimcheck.engine.fastpath) under claim errors, on a real server."""
from __future__ import annotations

import dataclasses
import multiprocessing
import os
import textwrap
from pathlib import Path

import psycopg
import pytest

from pg_claimcheck.contract.strategy import DEFAULT_SHAPE, load_strategy
from pg_claimcheck.engine.fastpath import LibpqBackend, PreparedStatement, Transaction
from pg_claimcheck.engine.logstream import LogStream, PipeSink
from pg_claimcheck.engine.shared import Shared
from pg_claimcheck.engine.worker import Loop, WorkerPlan, connect_worker
from pg_claimcheck.server.schema import build_jobs_table
from pg_claimcheck.server.session import run_schema
from pg_claimcheck.settings import RunSettings, WorkTime
from pg_claimcheck.verdict.ledger import DONE, WorkerLog
from pg_claimcheck.verdict.observed import WorkerTelemetry

NOWAIT_QUEUE = """
-- name: schema
CREATE TABLE q (id bigint PRIMARY KEY, locked_at timestamptz, done bool NOT NULL DEFAULT false);
-- name: seed
INSERT INTO q SELECT %(key_base)s + g FROM generate_series(0, %(jobs)s - 1) g RETURNING id;
-- name: remaining
SELECT count(*) FROM q WHERE NOT done;
-- name: complete
UPDATE q SET done = true WHERE id = %(id)s;
"""


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "claim.sql"
    path.write_text(textwrap.dedent(text))
    return str(path)


def test_lock_mode_claim_errors_roll_back_the_libpq_transaction(run, tmp_path):
    # A lone claim in lock mode runs BEGIN, claim, completions and COMMIT through libpq; NOWAIT's
    # 55P03 must roll that transaction back and be retried on the same connection.
    path = write(tmp_path, NOWAIT_QUEUE + """
        -- name: claim
        UPDATE q SET locked_at = now()
        WHERE id = (SELECT id FROM q WHERE locked_at IS NULL ORDER BY id LIMIT 1 FOR UPDATE NOWAIT)
        RETURNING id;
        """)
    result = run(path, workers=4, jobs=300, batch=1, mode="lock")
    assert result.exactly_once
    assert result.claim_errors.get("55P03", 0) > 0, result.claim_errors
    assert result.reconnects == 0


def test_fast_completions_survive_psycopgs_rollback_of_a_pick(run, tmp_path):
    # A pick's claim fails often here (NOWAIT) and its transaction rolls back: the fast completion
    # statement must still be there (psycopg's rollback would DEALLOCATE ALL), or every later
    # completion fails with 26000.
    path = write(tmp_path, NOWAIT_QUEUE + """
        -- name: pick
        SELECT id FROM q WHERE locked_at IS NULL ORDER BY id LIMIT 1;
        -- name: claim
        UPDATE q SET locked_at = now()
        WHERE id = (SELECT id FROM q WHERE id = ANY(%(id)s::bigint[]) AND locked_at IS NULL FOR UPDATE NOWAIT)
        RETURNING id;
        """)
    result = run(path, workers=4, jobs=300, batch=1, mode="lease")
    assert result.exactly_once
    assert result.claim_errors.get("55P03", 0) > 0, result.claim_errors
    assert "26000" not in result.claim_errors


def test_libpq_transaction_commits_and_rolls_back_like_psycopgs(server):
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        statement = PreparedStatement(conn, "claimcheck_test", "SELECT %(n)s::int")
        with Transaction(conn):
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
            assert statement.rows(statement.bind({"n": 1})) == [(b"1",)]
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        with pytest.raises(psycopg.errors.DivisionByZero):
            with Transaction(conn):
                conn.execute("SELECT 1/0")
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        # The rollback kept the prepared statement (nothing is deallocated): it runs as before.
        assert statement.rows(statement.bind({"n": 2})) == [(b"2",)]


FLAKY_COMPLETION = """
-- name: schema
CREATE TABLE q (id bigint PRIMARY KEY, claimed bool NOT NULL DEFAULT false, done bool NOT NULL DEFAULT false,
                attempts int NOT NULL DEFAULT 0);
CREATE SEQUENCE q_tick;
-- name: seed
INSERT INTO q SELECT %(key_base)s + g FROM generate_series(0, %(jobs)s - 1) g RETURNING id;
-- name: remaining
SELECT count(*) FROM q WHERE NOT done;
-- name: claim
UPDATE q SET claimed = true, attempts = attempts + 1
WHERE id IN (SELECT id FROM q WHERE NOT claimed ORDER BY id LIMIT %(batch)s FOR UPDATE SKIP LOCKED)
RETURNING id;
-- name: complete
-- Every third try raises 22012 (division by zero): a sequence is not rolled back with the error,
-- so the retry of the same completion gets the next number and succeeds.
UPDATE q SET done = true WHERE id = %(id)s AND claimed AND NOT done AND 1 / (nextval('q_tick') %% 3) >= 0;
"""


PLAIN_JOBS = 300
TIGHT_LOOP_MODES = pytest.mark.parametrize("mode, batch", [("lease", 10), ("lock", 1)])
"""Lock mode claims one job at a time: ten completions in one transaction would meet the
completion's trouble on every try."""
CLAIM_SHAPES = pytest.mark.parametrize("attempt", [False, True], ids=["key", "key-and-attempt"])
"""A claim returning its integer attempt too has each completion bound from the claim's own text
(`fastpath.Binder.__call__`); one returning only its key, from the numbers the worker read (`pairs`)."""


def drain_in_the_tight_loop(run, tmp_path, text: str, mode: str, batch: int, attempt: bool):
    """Zero work, no faults, no failures: each claim's completions in one call (`Cycle.alike`). Whatever
    the completion does, every job ends done, once. `attempt`: the claim returns the attempt, and
    the completion is fenced by it."""
    if attempt:
        fenced = text.replace("RETURNING id;", "RETURNING id, attempts;").replace(
            "WHERE id = %(id)s AND claimed", "WHERE id = %(id)s AND attempts = %(attempts)s AND claimed")
        assert fenced.count("attempts = %(attempts)s") == 1 and "RETURNING id, attempts;" in fenced
        text = fenced
    result = run(write(tmp_path, text), workers=3, jobs=PLAIN_JOBS, batch=batch, mode=mode,
                 work=WorkTime("fixed", 0.0))
    assert result.jobs_done == PLAIN_JOBS
    assert result.exactly_once, result.verdict
    return result


@CLAIM_SHAPES
@TIGHT_LOOP_MODES
def test_a_completion_that_raises_mid_claim_is_retried_and_the_rest_of_the_claim_finishes(run, tmp_path, mode, batch,
                                                                                           attempt):
    # In lease mode a completion that raises hands its job and the rest of the claim to the general
    # path, which retries it; in lock mode it rolls the claim back, and the job is claimed again.
    # Either way the errors are counted.
    result = drain_in_the_tight_loop(run, tmp_path, FLAKY_COMPLETION, mode, batch, attempt)
    assert result.claim_errors.get("22012", 0) > 0, result.claim_errors


SELF_TERMINATING_COMPLETION = FLAKY_COMPLETION.split("-- name: complete")[0] + """
-- name: complete
-- Every 25th try terminates its own backend (57P01), as a server going away would: the worker
-- reconnects and completes the job again on its new connection.
UPDATE q SET done = true WHERE id = %(id)s AND claimed AND NOT done
    AND CASE WHEN nextval('q_tick') %% 25 = 0 THEN pg_terminate_backend(pg_backend_pid()) ELSE true END;
"""


@CLAIM_SHAPES
@TIGHT_LOOP_MODES
def test_the_tight_loop_goes_on_with_the_new_connection_after_a_reconnect(run, tmp_path, mode, batch, attempt):
    # Each lost connection is one reconnect, and the next claims use the statements prepared on the
    # new connection (a loop that kept the old ones would fail every claim after the first loss, and
    # reconnect each time).
    result = drain_in_the_tight_loop(run, tmp_path, SELF_TERMINATING_COMPLETION, mode, batch, attempt)
    assert 1 <= result.reconnects <= PLAIN_JOBS // 25 + 3, result.reconnects


NULL_ATTEMPT = """
-- name: schema
CREATE TABLE q (id bigint PRIMARY KEY, claimed bool NOT NULL DEFAULT false, done bool NOT NULL DEFAULT false,
                attempts int);
-- name: seed
INSERT INTO q SELECT %(key_base)s + g FROM generate_series(0, %(jobs)s - 1) g RETURNING id;
-- name: remaining
SELECT count(*) FROM q WHERE NOT done;
-- name: claim
UPDATE q SET claimed = true
WHERE id IN (SELECT id FROM q WHERE NOT claimed ORDER BY id LIMIT %(batch)s FOR UPDATE SKIP LOCKED)
RETURNING id, attempts;
-- name: complete
UPDATE q SET done = true WHERE id = %(id)s AND coalesce(attempts, 0) = %(attempts)s AND claimed AND NOT done;
"""


@TIGHT_LOOP_MODES
def test_a_null_attempt_is_completed_as_attempt_0_as_the_ledger_reads_it(run, tmp_path, mode, batch):
    # The claim's integer attempt is NULL: the ledger reads it as attempt 0, and the completion is
    # bound with 0, as on the general path, not with the claim's NULL sent back as it came.
    drain_in_the_tight_loop(run, tmp_path, NULL_ATTEMPT, mode, batch, attempt=False)


@pytest.mark.parametrize("attempt_is_int", [True, False])
def test_the_built_in_claim_binds_its_completions_from_its_own_text(server, attempt_is_int):
    # Our jobs table's claim returns integer keys and attempts: its completions are bound from the
    # claim's own text (fastpath.Binder). An attempt column of another type binds the numbers read. Either
    # way the tight loop completes every job.
    receiver, sender = multiprocessing.Pipe(duplex=False)
    with run_schema(server, f"claimtext{os.getpid()}{int(attempt_is_int)}") as (admin, run):
        build_jobs_table(admin, run.schema, 30)
        plan = WorkerPlan(run=run, strategy=load_strategy("skip-locked"),
                          settings=RunSettings(workers=1, jobs=30, work=WorkTime("fixed", 0.0)),
                          shape=dataclasses.replace(DEFAULT_SHAPE, attempt_is_int=attempt_is_int))
        conn = connect_worker(plan, 0)
        log = WorkerLog(worker=0)
        backend = LibpqBackend(plan, "w00", conn, log.unknown_keys, connect=lambda: connect_worker(plan, 0))
        loop = Loop(plan, 0, backend, log, WorkerTelemetry(worker=0), Shared.local(),
                    LogStream(PipeSink(sender), log, plan.flush_interval_s))
        try:
            assert loop.cycle.alike and (backend.bind_claimed is not None) is attempt_is_int
            assert loop.cycle.claims() == 0  # claims until the queue is empty
        finally:
            backend.close()
        assert sorted(log.job) == list(range(1, 31)) and set(log.outcome) == {DONE}
        assert admin.execute("SELECT count(*) FROM jobs WHERE status = 'done'").fetchone()[0] == 30
