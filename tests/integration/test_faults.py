"""The lifecycle under faults, on the real server: nothing lost, nothing run twice while owned."""
import pytest

from pg_claimcheck.errors import UsageError
from pg_claimcheck.settings import FaultPlan, WorkTime

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


VISIBILITY_TIMEOUT = """
-- name: schema
CREATE TABLE q (id bigint PRIMARY KEY, read_ct int NOT NULL DEFAULT 0,
                vt timestamptz NOT NULL DEFAULT clock_timestamp(), done_at timestamptz);
-- name: seed
INSERT INTO q (id) SELECT %(key_base)s + g FROM generate_series(0, %(jobs)s - 1) g RETURNING id;
-- name: remaining
SELECT count(*) FROM q WHERE done_at IS NULL;
-- name: claim
WITH cte AS (SELECT id FROM q WHERE done_at IS NULL AND vt <= clock_timestamp()
             ORDER BY id LIMIT %(batch)s FOR UPDATE SKIP LOCKED)
UPDATE q SET vt = clock_timestamp() + make_interval(secs => %(lease_seconds)s), read_ct = q.read_ct + 1
FROM cte WHERE q.id = cte.id
RETURNING q.id, q.read_ct, q.vt AS lease_until;
-- name: complete
"""
"""A visibility-timeout queue on its own tables (pgmq's design, acknowledging by marking done):
no reaper, its claim re-takes a message whose vt passed. The acknowledgement is fenced by the
read count the claim returned, or not fenced at all."""
FENCED_ACK = "UPDATE q SET done_at = now() WHERE id = %(id)s AND read_ct = %(attempts)s;\n"
UNFENCED_ACK = "UPDATE q SET done_at = now() WHERE id = %(id)s;\n"
VT_LOAD = dict(workers=4, jobs=120, batch=1, lease_seconds=0.5, work=WorkTime.parse("10-30"),
               reap_every_s=0.2)  # --faults' default reaper interval, as the CLI passes it


@pytest.mark.parametrize("ack", ["fenced", "unfenced"])
def test_a_visibility_timeout_on_its_own_tables_runs_under_faults_without_a_reaper(run, tmp_path, ack):
    path = tmp_path / f"vt_{ack}.sql"
    path.write_text(VISIBILITY_TIMEOUT + (FENCED_ACK if ack == "fenced" else UNFENCED_ACK))
    # A stalled worker sleeps 2.5 leases: another re-reads its message after one and acknowledges
    # it; the stalled one's late acknowledgement then changes the row (unfenced) or nothing (fenced).
    result = run(str(path), faults=FaultPlan(kills=1, terminates=1, stalls=2, restarts=0), **VT_LOAD)
    v = result.verdict
    assert result.settings.reap_every_s is None and result.reaped == 0  # no reaper ran: the claim re-takes
    assert sorted(f.kind for f in result.faults) == ["kill", "stall", "stall", "terminate"]
    assert v.redeliveries >= 2 and v.double_claimed_jobs == 0  # re-reads after vt, judged by the lease
    if ack == "fenced":
        assert result.exactly_once, (v.violations[:2], result.unfinished_jobs)
        assert v.unclaimed_jobs == 0 and result.unfinished_jobs == 0 and v.stale_completions >= 1
    else:
        assert not result.exactly_once and v.stale_completion_violations >= 1, v


def test_own_tables_without_a_reap_section_or_a_lease_are_refused_under_faults(run, tmp_path):
    path = tmp_path / "no_lease.sql"
    path.write_text(VISIBILITY_TIMEOUT.replace("q.vt AS lease_until", "q.vt") + FENCED_ACK)
    with pytest.raises(UsageError, match="need its own 'reap' section .* or a claim that returns lease_until"):
        run(str(path), faults=FaultPlan(kills=1, terminates=0, stalls=0, restarts=0), **VT_LOAD)
