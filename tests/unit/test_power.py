"""The power statement from hand-built records (pg_claimcheck.verdict.power)."""
import pytest

from pg_claimcheck.verdict.ledger import WorkerLog
from pg_claimcheck.verdict.power import Power, claim_intervals, lock_waits, overlapping_claims, unseen, weakened


def log(worker: int, claims: list[tuple[float, float, int]]) -> WorkerLog:
    """A worker's log of claims given as (commit time, latency ms, rows)."""
    out = WorkerLog(worker)
    for at, latency_ms, rows in claims:
        out.record_claims([(worker * 1000 + i, 1) for i in range(rows)], at)
        out.claim_latency_ms.append(latency_ms)
    return out


def test_a_claim_s_interval_is_its_commit_less_its_latency_and_its_rows_are_one_claim():
    assert claim_intervals(log(0, [(1.0, 100.0, 3), (2.0, 500.0, 1)])) == [(0.9, 1.0, None), (1.5, 2.0, None)]


def test_claims_overlap_only_with_another_worker_s_claim_in_flight():
    a = log(0, [(1.0, 100.0, 2), (2.0, 100.0, 2)])  # (0.9, 1.0), (1.9, 2.0)
    b = log(1, [(1.05, 100.0, 2), (3.0, 100.0, 2)])  # (0.95, 1.05) overlaps a's first; (2.9, 3.0) none
    assert overlapping_claims([a, b]) == (4, 2)
    assert overlapping_claims([log(0, [(1.0, 100.0, 1), (1.05, 100.0, 1)])]) == (2, 0)  # one worker: never
    assert overlapping_claims([a, WorkerLog(1)]) == (2, 0)


def test_the_statement_of_a_held_says_what_its_overlaps_were_worth():
    power = Power(claims=400, overlapping=300)
    assert power.chance(100) == pytest.approx(1 - 0.99 ** 300)
    assert "300 of 400 claims overlapped" in power.statement() and "1 of 100: 0.95" in power.statement()
    assert "could not have shown" in Power(claims=10, overlapping=0).statement()
    data = power.as_dict()
    assert data["overlapping_claims"] == 300 and data["detect_1_in_100"] == pytest.approx(0.951, abs=1e-3)


def test_lock_waits_are_the_sampled_lock_events_and_none_when_nothing_was_sampled():
    assert lock_waits({"Lock/transactionid": 3, "Lock/tuple": 2, "IO/DataFileRead": 7}, samples=10) == 5
    assert lock_waits({}, samples=0) is None


def test_what_the_run_could_not_have_seen():
    lease = unseen(overlapping=5, leased=True, released=False, session_locks=False, fail_rate=0.0, retried=False)
    assert len(lease) == 1 and "--faults" in lease[0]
    assert unseen(overlapping=5, leased=True, released=True, session_locks=True, fail_rate=0.0, retried=False) == ()
    quiet = unseen(overlapping=0, leased=False, released=False, session_locks=True, fail_rate=0.1, retried=False)
    assert any("session lock" in x for x in quiet) and any("retry" in x for x in quiet)


def test_a_run_whose_power_fell_by_more_than_half_is_weakened():
    assert weakened({"overlapping_claims": 100}, {"overlapping_claims": 49})
    assert not weakened({"overlapping_claims": 100}, {"overlapping_claims": 50})
    assert not weakened(None, {"overlapping_claims": 1}) and not weakened({"overlapping_claims": 0}, {})


def test_a_near_certainty_is_not_rounded_to_one():
    assert "1 of 100: > 0.99" in Power(claims=2000, overlapping=1969).statement()


def test_claims_one_pooled_backend_ran_never_overlapped():
    a, b = log(0, [(1.0, 100.0, 2)]), log(1, [(1.05, 100.0, 2)])
    a.backends, b.backends = [(0, 7), (1, 7)], [(0, 7), (1, 7)]
    assert overlapping_claims([a, b]) == (2, 0)  # a pool of one: the server ran them one after the other
    b.backends = [(0, 8), (1, 8)]
    assert overlapping_claims([a, b]) == (2, 2)


def test_a_report_did_not_see_only_what_none_of_its_runs_saw():
    """A check's lease-expiry run saw leases end though its run as seeded did not: the report's power
    no longer says "no lease expired"; a line every run has stays."""
    from pg_claimcheck.verdict.power import combined
    expired_nowhere = unseen(overlapping=5, leased=True, released=False, session_locks=True, fail_rate=0.0,
                             retried=False)
    expired_here = unseen(overlapping=0, leased=True, released=True, session_locks=True, fail_rate=0.0,
                          retried=False)
    whole = combined([Power(10, 5, unseen=expired_nowhere), Power(10, 0, unseen=expired_here)])
    assert whole is not None and whole.unseen == ()
    both = combined([Power(10, 0, unseen=expired_here), Power(10, 0, unseen=expired_here)])
    assert both is not None and both.unseen == expired_here and "no session lock" in both.unseen[0]
