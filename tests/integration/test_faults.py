"""The lifecycle under faults, on the real server: nothing lost, nothing run twice while owned."""
import pytest

from claimcheck.settings import FaultPlan, WorkTime

FAULT_LOAD = dict(workers=8, jobs=3_000, batch=10, lease_seconds=1.0, reap_every_s=0.2, fail_rate=0.05,
                  backoff_unit_s=0.02)


@pytest.mark.parametrize("mode", ["lease", "lock"])
def test_fenced_skip_locked_survives_every_fault_kind(run, server, mode):
    plan = FaultPlan(kills=1, terminates=1, stalls=1, restarts=1 if server.restart else 0)
    result = run("skip-locked", mode=mode, faults=plan, **FAULT_LOAD)
    kinds = sorted(f.kind for f in result.faults)
    assert kinds == sorted(["kill", "terminate", "stall"] + (["restart"] if server.restart else []))
    v = result.verdict
    assert result.exactly_once, (v.violations[:3], result.table)
    assert v.double_claimed_jobs == 0 and v.stale_completion_violations == 0
    assert v.unclaimed_jobs == 0 and result.unfinished_jobs == 0          # nothing lost
    assert result.table.done + result.table.failed == 3_000
    assert result.table.over_max_attempts == 0
    assert v.redeliveries > 0                                             # the failures came back
    assert result.reconnects >= 1                                         # the terminated backend


def test_unfenced_completion_is_caught_by_the_stalled_worker_fault(run):
    plan = FaultPlan(kills=0, terminates=0, stalls=2, restarts=0)
    result = run("skip-locked-unfenced", mode="lease", faults=plan, workers=8, jobs=2_000, batch=10,
                 lease_seconds=1.0, reap_every_s=0.2)
    v = result.verdict
    assert v.stale_completion_violations >= 1, v
    assert not result.exactly_once
    stale = [x for x in v.violations if x.kind == "stale-completion"]
    assert stale and stale[0].claims[0].reaped_at_s is not None


def test_fenced_strategy_passes_the_same_stall(run):
    plan = FaultPlan(kills=0, terminates=0, stalls=2, restarts=0)
    result = run("skip-locked", mode="lease", faults=plan, workers=8, jobs=2_000, batch=10,
                 lease_seconds=1.0, reap_every_s=0.2)
    assert result.exactly_once
    assert result.verdict.stale_completions >= 1  # the stalled worker's completion was fenced off
    assert result.verdict.redeliveries >= 1


def test_long_jobs_extend_their_lease_and_are_not_reaped(run):
    # Work of 0.6 s against a 0.5 s lease: without extensions the reaper would hand jobs out again.
    result = run("skip-locked", mode="lease", workers=4, jobs=12, batch=1, lease_seconds=0.5, reap_every_s=0.1,
                 work=WorkTime.parse("600"))
    assert result.exactly_once
    assert result.reaped == 0 and result.verdict.redeliveries == 0
