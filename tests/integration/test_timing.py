"""Timing conditions and condition settings on a real server (pg_claimcheck.plans.timing, conditions.under)."""
from pg_claimcheck.contract.strategy import load_strategy
from pg_claimcheck.engine.worker import WorkerPlan, connect_worker
from pg_claimcheck.plans.conditions import NESTED, SNAPSHOT_PAUSE, under
from pg_claimcheck.plans.explore import explore
from pg_claimcheck.server.session import run_schema
from pg_claimcheck.settings import RunSettings

TWO = RunSettings(workers=2, jobs=300, batch=10, stop_early=True)


def test_a_condition_s_settings_are_the_workers_sessions_and_nobody_else_s(server):
    with run_schema(server) as (conn, run):
        plan = WorkerPlan(run, under(load_strategy("skip-locked"), NESTED), TWO)
        with connect_worker(plan, 0) as worker:
            assert worker.execute("SHOW enable_hashjoin").fetchone()[0] == "off"
        assert conn.execute("SHOW enable_hashjoin").fetchone()[0] == "on"


def test_snapshot_pause_catches_a_lock_released_at_commit_with_two_workers_and_leaves_the_tables_as_they_were(server):
    # advisory-lock's double claim needs a claim whose snapshot predates another's commit and unlock:
    # the pause holds that window open, so two workers are enough. A run catches it nearly always
    # (tests/benchmarks/timing_conditions.py); three runs make a miss on a loaded machine negligible.
    with run_schema(server) as (conn, run):
        for _ in range(3):
            (outcome,) = explore(conn, server, run, load_strategy("advisory-lock"), TWO, (SNAPSHOT_PAUSE,))
            if outcome.failed:
                break
        assert outcome.verdict == "VIOLATED" and outcome.result.verdict.double_claimed_jobs >= 1
        kinds = conn.execute("SELECT relname, relkind::text FROM pg_class WHERE relnamespace = current_schema()::regnamespace "
                             "AND relkind IN ('r', 'v')").fetchall()
        assert ("jobs", "r") in kinds and not [k for k in kinds if k[1] == "v"]
        assert conn.execute("SELECT to_regproc('claimcheck_pause')").fetchone()[0] is None


def test_snapshot_pause_holds_a_safe_claim_and_its_run_has_power_figures(server):
    with run_schema(server) as (conn, run):
        (outcome,) = explore(conn, server, run, load_strategy("tests/field/que_0_14_session_advisory.sql"), TWO,
                             (SNAPSHOT_PAUSE,))
        assert outcome.verdict == "held", outcome.note
        power = outcome.result.power
        assert power is not None and power.claims >= 1 and 0 <= power.overlapping <= power.claims
