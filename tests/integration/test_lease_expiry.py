"""The lease-expiry condition on a real server (pg_claimcheck.plans.conditions.LEASE_EXPIRY): a check at
its defaults tries a completion after its lease ended, which only `--faults` tried before."""
import dataclasses

import pytest

from pg_claimcheck.contract.strategy import load_strategy
from pg_claimcheck.engine.driver import run_strategy
from pg_claimcheck.plans.conditions import LEASE_EXPIRY
from pg_claimcheck.plans.explore import explore
from pg_claimcheck.server.session import run_schema
from pg_claimcheck.settings import Mode, RunSettings

TWO = RunSettings(workers=2, jobs=300, batch=10, stop_early=True)


@pytest.mark.parametrize("design", ["skip-locked-unfenced", "tests/field/solid_queue_1_4_prune_unfenced_finish.sql",
                                    # completions that delete by id: they change a row only while
                                    # someone still holds the job (the second taker holds it)
                                    "tests/field/pgqueuer_1_3_heartbeat.sql",
                                    "tests/field/pgmq_1_5_visibility_timeout.sql"])
def test_an_unfenced_completion_is_caught_at_the_defaults(server, design):
    with run_schema(server) as (conn, run):
        (outcome,) = explore(conn, server, run, load_strategy(design), TWO, (LEASE_EXPIRY,))
    v = outcome.result.verdict
    assert outcome.verdict == "VIOLATED" and v.stale_completion_violations >= 1, (outcome.note, v.violations[:2])
    assert [f.kind for f in outcome.result.faults] == ["stall", "stall"]


@pytest.mark.parametrize("design", ["skip-locked", "tests/field/solid_queue_1_5_claimed_executions.sql"])
def test_a_fenced_completion_holds_and_a_lease_did_end(server, design):
    with run_schema(server) as (conn, run):
        (outcome,) = explore(conn, server, run, load_strategy(design), TWO, (LEASE_EXPIRY,))
    result = outcome.result
    assert outcome.verdict == "held", (outcome.note, result.verdict.violations[:2])
    # Both stalls landed, however fast the run drained (they are armed before it starts), and
    # the stalled claims were given back and taken again: a completion after its lease was tried.
    assert [f.kind for f in result.faults] == ["stall", "stall"] and not result.faults_skipped
    assert result.verdict.redeliveries >= 1
    assert not any("no lease expired" in line for line in result.power.unseen)


def test_it_is_not_applicable_in_lock_mode_or_where_nothing_gives_a_claim_back(server):
    with run_schema(server) as (conn, run):
        (lock,) = explore(conn, server, run, load_strategy("skip-locked"), dataclasses.replace(TWO, mode=Mode.LOCK),
                          (LEASE_EXPIRY,))
        (own,) = explore(conn, server, run, load_strategy("tests/field/delayed_job_ar_pr177_cte.sql"), TWO,
                         (LEASE_EXPIRY,))
    assert lock.verdict == "not applicable" and "lock mode" in lock.note
    assert own.verdict == "not applicable" and "no 'reap' section" in own.note


def test_a_run_without_a_lease_that_ended_says_so_in_lease_mode_only(server):
    # In lock mode the row lock holds the job for its whole work: the lease the claim writes never
    # ends, so "no lease expired" is no gap of the run (it read so under a check in --mode lock).
    small = RunSettings(workers=2, jobs=100, batch=10)
    with run_schema(server) as (conn, run):
        lease = run_strategy(conn, server, run, load_strategy("skip-locked"), small)
        lock = run_strategy(conn, server, run, load_strategy("skip-locked"), dataclasses.replace(small, mode=Mode.LOCK))
    assert lease.exactly_once and lock.exactly_once
    assert any("no lease expired" in line for line in lease.power.unseen), lease.power.unseen
    assert not any("no lease expired" in line for line in lock.power.unseen), lock.power.unseen
