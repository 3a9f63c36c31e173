"""Runs through a real PgBouncer: the one `--pooler` starts, and one the test starts itself and hands
over as a plain DSN (a pooler claimcheck did not start, found by its behaviour).

Behind transaction pooling a session advisory lock belongs to a backend that serves every client in
turn: que 0.14's and good_job's designs hand one job to several workers, and the evidence names the
backend they shared. In session mode the same files hold; skip-locked holds in every mode. Small
runs (4 workers, a few hundred jobs, a pool of 2), so the file costs a few seconds.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

from pg_claimcheck.cli import main
from pg_claimcheck.contract.strategy import load_strategy
from pg_claimcheck.engine.backend import PsycopgBackend
from pg_claimcheck.engine.driver import run_strategy
from pg_claimcheck.engine.fastpath import InlineStatement, Transaction
from pg_claimcheck.engine.logstream import LogStream
from pg_claimcheck.engine.shared import Shared
from pg_claimcheck.engine.worker import Loop, WorkerPlan, connect_worker, worker_role
from pg_claimcheck.errors import ServerError, SqlFileError, UsageError
from pg_claimcheck.server.pgbouncer import PgBouncer, PoolerSpec, pgbouncer_path
from pg_claimcheck.server.provision import provide_server
from pg_claimcheck.server.pooling import Pooler
from pg_claimcheck.server.runcontext import RunContext, StatelessConnection
from pg_claimcheck.server.topology import Topology
from pg_claimcheck.server.schema import build_jobs_table
from pg_claimcheck.server.session import run_schema
from pg_claimcheck.settings import RunSettings
from pg_claimcheck.verdict.ledger import DONE, WorkerLog
from pg_claimcheck.verdict.observed import WorkerTelemetry

AS_POOLED = Topology(found=Pooler(mode="transaction", started=False, evidence="none: the test connects as through one"))
"""Every connection as through a pooler, with none in between."""


def _missing() -> str | None:
    try:
        pgbouncer_path()
    except ServerError:
        return "PgBouncer is not installed here (apt-get install pgbouncer; .ci/run installs it)"
    return None


pytestmark = pytest.mark.skipif(_missing() is not None, reason=_missing() or "")

FIELD = Path(__file__).parents[1] / "field"
SESSION_ADVISORY = ["que_0_14_session_advisory.sql", "good_job_3_99_advisory_uuid.sql"]
SMALL = {"workers": 4, "jobs": 200, "batch": 1}
SESSION = {"workers": 2, "jobs": 200, "batch": 1}
"""As many workers as the pool has connections: in session mode a third would wait for one to leave."""
POOL = 2


@contextmanager
def pooled(server, mode: str):
    """The test's server with `--pooler pgbouncer:MODE --pool-size 2` in front of its workers."""
    with provide_server(dsn=server.dsn, pooler=PoolerSpec(mode, POOL)) as through:
        yield through


def _run(server, strategy: str, **settings):
    with run_schema(server) as (conn, run):
        return run_strategy(conn, server, run, load_strategy(strategy), RunSettings(**settings))


@pytest.mark.parametrize("design", SESSION_ADVISORY)
def test_session_advisory_locks_are_shared_by_the_workers_of_a_transaction_pool(server, design):
    with pooled(server, "transaction") as through:
        assert through.pooler.mode == "transaction" and through.pooler.started
        result = _run(through, str(FIELD / design), **SMALL)
    assert not result.exactly_once
    shared = [v for v in result.verdict.violations
              if len({c.worker for c in v.claims}) > 1 and len({c.backend_pid for c in v.claims}) == 1]
    assert shared, "no double claim whose claims ran on one backend"
    assert shared[0].claims[0].backend_pid is not None


def test_a_plain_claims_evidence_names_its_backends_too(server):
    """naive-single's claims take the worker's fast path (one claim statement, one completion)."""
    with pooled(server, "transaction") as through:
        result = _run(through, "naive-single", workers=4, jobs=200)
    assert not result.exactly_once
    assert all(c.backend_pid is not None for v in result.verdict.violations for c in v.claims)


class _Kept:
    """A RecordSink that keeps nothing: the test reads the worker's own log."""

    def send_delta(self, delta) -> None:
        pass

    def send_end(self, summary: dict) -> None:
        pass


@pytest.mark.parametrize("mode", ["lease", "lock"])
def test_the_psycopg_backend_drains_through_a_transaction_pool(server, mode):
    # Locust's users take psycopg's general path (pg_claimcheck.engine.backend.PsycopgBackend): through a
    # transaction pool its StatelessConnection binds on the client and prepares nothing by name, and
    # each claim's backend is recorded.
    with pooled(server, "transaction") as through, run_schema(through) as (admin, run):
        build_jobs_table(admin, run.schema, 60)
        plan = WorkerPlan(run=run, strategy=load_strategy("skip-locked"),
                          settings=RunSettings(workers=1, jobs=60, batch=5, mode=mode))
        conn = connect_worker(plan, 0)
        assert isinstance(conn, StatelessConnection)
        log = WorkerLog(worker=0)
        backend = PsycopgBackend(plan, worker_role(0), conn, log.unknown_keys, connect=lambda: connect_worker(plan, 0))
        telemetry = WorkerTelemetry(worker=0)
        try:
            Loop(plan, 0, backend, log, telemetry, Shared.local(), LogStream(_Kept(), log, 1.0)).run()
        finally:
            backend.close()
        assert admin.execute("SELECT count(*) FROM jobs WHERE status = 'done'").fetchone()[0] == 60
    assert telemetry.drained and sorted(log.job) == list(range(1, 61)) and set(log.outcome) == {DONE}
    assert sorted(slot for slot, _ in log.backends) == list(range(60))
    assert all(pid is not None for _, pid in log.backends)


@pytest.mark.parametrize("design", [*SESSION_ADVISORY, "skip-locked"])
def test_session_mode_keeps_each_worker_on_its_backend(server, design):
    strategy = str(FIELD / design) if design.endswith(".sql") else design
    with pooled(server, "session") as through:
        result = _run(through, strategy, **SESSION)
    assert result.exactly_once, result.verdict.violations[:1]
    assert result.verdict.unclaimed_jobs == 0


@pytest.mark.parametrize("mode", ["lease", "lock"])
def test_skip_locked_holds_behind_a_transaction_pool(server, mode):
    with pooled(server, "transaction") as through:
        result = _run(through, "skip-locked", workers=4, jobs=400, mode=mode)
    assert result.exactly_once and result.jobs_done == 400


def test_a_dsn_to_a_pgbouncer_we_did_not_start_is_found_and_run_through(server):
    bouncer = PgBouncer(server.dsn, PoolerSpec("transaction"), POOL)
    bouncer.start()
    try:
        with provide_server(dsn=bouncer.dsn) as foreign:
            assert foreign.pooler is not None and not foreign.pooler.started
            assert foreign.pooler.mode == "transaction", foreign.pooler
            # Everything goes through it: the schema, the seed, the validation, the workers.
            held = _run(foreign, "skip-locked", workers=4, jobs=200)
            broken = _run(foreign, str(FIELD / "que_0_14_session_advisory.sql"), **SMALL)
    finally:
        bouncer.stop()
    assert held.exactly_once and held.jobs_done == 200
    assert not broken.exactly_once


@pytest.mark.parametrize("design", ["serializable", str(FIELD / "hasura_event_fetch_repeatable_read.sql")])
def test_a_design_of_another_isolation_level_validates_through_a_pooler_in_front_of_the_dsn(server, design):
    """Its validation's BEGIN names the level: through a pooler the transaction's first statement sets
    its search path, a query, after which SET TRANSACTION ISOLATION LEVEL is refused (it was, blamed on
    the claim: "section 'claim' fails on the server: SET TRANSACTION ISOLATION LEVEL must be called
    before any query")."""
    bouncer = PgBouncer(server.dsn, PoolerSpec("transaction"), POOL)
    bouncer.start()
    try:
        with provide_server(dsn=bouncer.dsn) as foreign:
            result = _run(foreign, design, workers=4, jobs=200)
    finally:
        bouncer.stop()
    assert result.exactly_once and result.jobs_done == 200


def test_a_session_pool_is_found_by_a_new_client_inheriting_a_backend(server):
    bouncer = PgBouncer(server.dsn, PoolerSpec("session"), POOL)
    bouncer.start()
    try:
        with provide_server(dsn=bouncer.dsn) as foreign:
            assert foreign.pooler is not None and foreign.pooler.mode == "session", foreign.pooler
    finally:
        bouncer.stop()
    with provide_server(dsn=server.dsn) as direct:
        assert direct.pooler is None


BAD_COMPLETE = """-- lifecycle: shared
-- name: claim
WITH picked AS (SELECT id FROM jobs WHERE status = 'queued' ORDER BY id LIMIT %(batch)s FOR UPDATE SKIP LOCKED)
UPDATE jobs SET status = 'running', attempts = attempts + 1 FROM picked WHERE jobs.id = picked.id
RETURNING jobs.id, jobs.attempts;

-- name: complete
UPDATE jobs SET status = 'done', no_such_column = 1 WHERE id = %(id)s;
"""


@contextmanager
def foreign_statement_pool(server):
    """A PgBouncer in statement mode the test starts, handed over as a plain --dsn: every connection of
    the run goes through it (schema, seed, validation, plans, workers, cleanup)."""
    bouncer = PgBouncer(server.dsn, PoolerSpec("statement"), POOL)
    bouncer.start()
    try:
        with provide_server(dsn=bouncer.dsn) as foreign:
            yield foreign
    finally:
        bouncer.stop()


def test_a_dsn_to_a_statement_pool_runs_the_harness_without_transaction_blocks(server, tmp_path):
    """The schema and the seed commit as one message each, the validation and the plans' EXPLAIN are
    replayed statement by statement and rolled back (so the workers still find every job queued), and a
    file's own tables are built in one message: skip-locked and pgmq hold, a bad completion is placed on
    its line and character, and the run leaves no schema."""
    bad = tmp_path / "bad_complete.sql"
    bad.write_text(BAD_COMPLETE)
    with foreign_statement_pool(server) as foreign:
        assert foreign.pooler.mode == "statement" and not foreign.pooler.started, foreign.pooler
        held = _run(foreign, "skip-locked", workers=4, jobs=300)
        own = _run(foreign, str(FIELD / "pgmq_1_5_visibility_timeout.sql"), workers=4, jobs=200)
        with pytest.raises(SqlFileError) as refused:
            _run(foreign, str(bad), workers=2, jobs=50)
        with pytest.raises(UsageError, match="lock mode holds one transaction"):
            _run(foreign, "skip-locked", workers=2, jobs=50, mode="lock")
    assert held.exactly_once and held.jobs_done == 300 and not held.claim_errors
    assert own.exactly_once and own.jobs_done == 200
    assert f"{bad}:8: section 'complete' fails on the server: column \"no_such_column\"" in str(refused.value)
    assert "(at character 34 of the statement)" in str(refused.value)
    with psycopg.connect(server.dsn, autocommit=True) as direct:
        mine = direct.execute("SELECT count(*) FROM pg_namespace WHERE obj_description(oid, 'pg_namespace') LIKE %s",
                              (f'%"pid": {os.getpid()},%',)).fetchone()[0]
    assert mine == 0, "a run's schema was left behind"


def test_check_through_a_dsn_to_a_statement_pool_says_which_conditions_it_cannot_make(server, capsys):
    """stale-stats keeps its seed's transaction open while another connection analyzes, and the SET LOCAL
    conditions share the claim's transaction: not applicable there, each said why; the others run."""
    bouncer = PgBouncer(server.dsn, PoolerSpec("statement"), POOL)
    bouncer.start()
    try:
        assert main(["check", "skip-locked", "--dsn", bouncer.dsn, "--workers", "2", "--jobs", "200"]) == 0
        err = " ".join(capsys.readouterr().err.split())
        assert main(["check", "skip-locked", "--dsn", bouncer.dsn, "--pooler", "pgbouncer"]) == 2
        refused = " ".join(capsys.readouterr().err.split())
    finally:
        bouncer.stop()
    assert "stale-stats: not applicable: its statistics are taken while the seed's transaction is still open" in err
    assert "nested-loop: not applicable: its settings are SET LOCAL" in err
    assert "history: 200 done" in err and "as-seeded: 200 done" in err
    assert "goes through a pooler in statement mode" in refused and "--pooler pgbouncer:statement" in refused


def test_a_step_that_needs_a_transaction_block_through_a_statement_pool_says_so(server):
    """A transaction that commits and reads between its statements has no one-message form: refused in
    words, not with PgBouncer's 08P01 and a closed connection."""
    with foreign_statement_pool(server) as foreign:
        with RunContext(foreign.dsn, "blocks", foreign.topology).connect("coordinator", in_schema=False) as conn:
            with pytest.raises(UsageError, match="needs a transaction block across statements"):
                with conn.transaction():
                    pass
            assert conn.execute("SELECT 1").fetchone() == (1,)  # nothing reached the pooler


def test_skip_locked_holds_behind_a_statement_pool(server):
    """Its claim is one statement and each completion another: each its own transaction, which
    statement pooling allows (the prelude of search path and isolation shares the statement's message)."""
    with pooled(server, "statement") as through:
        assert through.pooler.mode == "statement" and through.pooler.started
        result = _run(through, "skip-locked", workers=4, jobs=400)
    assert result.exactly_once and result.jobs_done == 400
    assert not result.claim_errors, result.claim_errors


@pytest.mark.parametrize("design, mode, why", [
    ("skip-locked", "lock", "lock mode holds one transaction across the claim, the work and the completions"),
    (str(FIELD / "que_0_14_session_advisory.sql"), "lease", "its pick and its claim run in one transaction"),
    (str(FIELD / "good_job_3_99_advisory_uuid.sql"), "lease", "its pick and its claim run in one transaction"),
])
def test_a_design_that_needs_a_transaction_block_is_refused_behind_a_statement_pool(server, design, mode, why):
    """PgBouncer answers BEGIN in statement mode with 08P01 and closes the connection (shown below): such a
    run would claim nothing. Refused from the design's own sections before anything is seeded (the CLI
    refuses before the schema: tests/acceptance/test_pooler_cli.py); que's and good_job's session-advisory
    designs are refused so: their lock is taken in a pick, in the claim's transaction."""
    with pooled(server, "statement") as through:
        with pytest.raises(UsageError, match="statement mode") as refused:
            with run_schema(through) as (conn, run):
                run_strategy(conn, through, run, load_strategy(design), RunSettings(mode=mode, **SMALL))
        assert why in str(refused.value) and "Nothing was run" in str(refused.value)
        with psycopg.connect(through.dsn, autocommit=True) as direct:
            assert not direct.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (run.schema,)).fetchone()
        with psycopg.connect(through.topology.workers, autocommit=True) as worker:
            with pytest.raises(psycopg.errors.ProtocolViolation, match="statement pooling"):
                worker.execute("BEGIN")
            assert worker.closed


def test_the_probes_behind_a_statement_pool_run_or_say_why_not(server, capsys):
    """vacuum's workers claim in one statement and complete a claim's jobs in one message (an implicit
    transaction); explain's plans are the coordinator's, direct. notify's producer needs a transaction
    across statements, and is refused before anything starts."""
    given = ["--dsn", server.dsn, "--pooler", "pgbouncer:statement"]
    assert main(["vacuum", "--jobs", "200", "--holders", "none,claim", *given]) == 0, capsys.readouterr().err
    assert main(["explain", "skip-locked", *given]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["notify", *given]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "notify cannot run behind a pooler in statement mode" in err and "SQLSTATE 08P01" in err


@pytest.mark.parametrize("given, error", [("pgbouncer:auto", "the mode is one of"), ("pgpool", "is pgbouncer"),
                                          ("pgbouncer:session", None), ("pgbouncer:statement", None)])
def test_the_pooler_option_names_what_it_accepts(given, error):
    if error is None:
        assert PoolerSpec.parse(given, 3) == PoolerSpec(given.partition(":")[2], 3)
        return
    with pytest.raises(UsageError, match=error):
        PoolerSpec.parse(given)


def test_an_inline_statement_binds_quoted_literals_where_psycopg_reads_placeholders(server):
    """The worker's fast path through a pooler: `%(name)s` as psycopg reads it (a `$1` or `%%` inside the
    SQL's own literal is text), each value quoted, the run's search path and isolation in the same
    message, the backend recorded."""
    run = RunContext(server.dsn, "inline", AS_POOLED)
    with run.connect("w00", in_schema=False, worker=True, isolation="repeatable read") as conn:
        conn.schema = "pg_catalog"
        statement = InlineStatement(conn, "SELECT %(n)s::int + 1, %(text)s, '$1 100%%', current_setting("
                                          "'search_path'), current_setting('transaction_isolation')")
        rows = statement.rows(statement.bind({"n": 41, "text": "it's"}))
        assert rows == [(b"42", b"it's", b"$1 100%", b"pg_catalog", b"repeatable read")]
        assert conn.backend_pid == conn.info.backend_pid  # directly, the connection's own backend
        counts, _, error = statement.rowcount_each([[b"1", b"a"], [b"x", b"b"]])
        assert counts == [1] and error is not None and error.sqlstate == "22P02"


def test_a_libpq_transaction_through_a_pooler_begins_with_the_connections_prelude(server):
    """The BEGIN message of a worker's explicit transaction sets its isolation and search path for all
    of it, and records the backend that runs it."""
    run = RunContext(server.dsn, "inline", AS_POOLED)
    with run.connect("w00", in_schema=False, worker=True, isolation="serializable") as conn:
        conn.schema = "pg_catalog"
        transaction = Transaction(conn)
        statement = InlineStatement(conn, "SELECT current_setting('search_path'), "
                                          "current_setting('transaction_isolation')")
        with transaction:
            assert conn.backend_pid == conn.info.backend_pid
            assert statement.rows([]) == [(b"pg_catalog", b"serializable")]


def test_a_statement_inside_an_explicit_transaction_carries_no_prelude(server):
    """Its transaction's start set the search path for all of it, on one backend: no statement inside
    sets it again (an extra statement per job on the pooled lock path). Both kinds of transaction record
    the backend that runs them."""
    run = RunContext(server.dsn, "inline", AS_POOLED)
    with run.connect("w00", in_schema=False, worker=True, isolation="read committed") as conn:
        conn.schema = "pg_catalog"
        statement = InlineStatement(conn, "SELECT current_setting('search_path')")
        with Transaction(conn):
            conn.pgconn.exec_(b"SELECT set_config('search_path', 'public', true)")
            assert statement.rows([]) == [(b"public",)]
            assert conn.execute("SELECT current_setting('search_path')").fetchone() == ("public",)
        conn.backend_pid = None
        with conn.transaction():
            assert conn.backend_pid == conn.info.backend_pid
            assert conn.execute("SELECT current_setting('search_path')").fetchone() == ("pg_catalog",)


def test_interleave_refuses_a_pooler_found_in_front_of_the_dsn(server, capsys):
    bouncer = PgBouncer(server.dsn, PoolerSpec("transaction"), POOL)
    bouncer.start()
    try:
        assert main(["interleave", "seed000_naive_subquery", "--dsn", bouncer.dsn]) == 2
    finally:
        bouncer.stop()
    assert "goes through a pooler" in capsys.readouterr().err


def test_an_inline_statement_quotes_a_value_right_without_standard_conforming_strings(server):
    run = RunContext(server.dsn, "inline", AS_POOLED)
    with run.connect("w00", in_schema=False, worker=True) as conn:
        conn.execute("SET standard_conforming_strings TO off")
        statement = InlineStatement(conn, "SELECT %(text)s::text")
        value = "a\\'b\\"
        assert statement.rows(statement.bind({"text": value})) == [(value.encode(),)]


def test_wakeup_notify_is_refused_through_a_pooler_found_in_front_of_the_dsn(server):
    bouncer = PgBouncer(server.dsn, PoolerSpec("transaction"), POOL)
    bouncer.start()
    try:
        with provide_server(dsn=bouncer.dsn) as foreign:
            with pytest.raises(UsageError, match="--wakeup notify needs workers that can LISTEN"):
                _run(foreign, "skip-locked", workers=2, jobs=5, rate_per_s=10, produce_s=0.5, wakeup="notify")
    finally:
        bouncer.stop()
