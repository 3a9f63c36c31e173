import math

from hypothesis import given
from hypothesis import strategies as st

from pg_claimcheck.verdict.ledger import CLAIM_IS_COMPLETION, DONE, LIVE, STALE, WorkerLog, judge


def log(worker, *claims):
    """claims: (job, attempt, claimed_at, ended_at or None, outcome)."""
    out = WorkerLog(worker=worker)
    for job, attempt, claimed, ended, outcome in claims:
        out.record(job, attempt, claimed, math.nan if ended is None else ended, outcome)
    return out


def test_clean_drain_is_exactly_once():
    v = judge([log(0, (1, 1, 0.1, 0.2, DONE), (2, 1, 0.1, 0.3, DONE)), log(1, (3, 1, 0.15, 0.25, DONE))],
              1, 3, drained=True)
    assert (v.claims, v.unique_jobs_claimed, v.double_claimed_jobs, v.extra_claims, v.unclaimed_jobs) == (3, 3, 0, 0, 0)
    assert v.exactly_once


def test_second_claim_while_the_first_is_live_is_a_concurrent_violation():
    # Seed 000: A claims job 1 and holds it; B's claim commits before A completes.
    v = judge([log(0, (1, 1, 0.10, 0.50, STALE)), log(1, (1, 2, 0.20, 0.60, DONE))], 1, 1, drained=True)
    assert not v.exactly_once
    assert v.double_claimed_jobs == 1 and v.extra_claims == 1 and v.stale_completions == 1
    (violation,) = v.violations
    assert violation.kind == "concurrent"
    assert [(c.worker, c.attempt) for c in violation.claims] == [(0, 1), (1, 2)]


def test_claim_after_completion_is_a_violation_too():
    # Seed 003's pgbench run: the claim completes the job, another worker claims it again.
    v = judge([log(0, (7, 1, 0.1, 0.1, CLAIM_IS_COMPLETION)), log(3, (7, 2, 0.3, 0.3, CLAIM_IS_COMPLETION))],
              7, 7, drained=True)
    assert v.double_claimed_jobs == 1
    assert v.violations[0].kind == "after-done"


def test_live_claim_at_the_end_is_concurrent_with_a_later_one():
    v = judge([log(0, (1, 1, 0.1, None, LIVE)), log(1, (1, 2, 0.2, 0.3, DONE))], 1, 1, drained=True)
    assert v.violations[0].kind == "concurrent"
    assert v.violations[0].claims[0].ended_at_s is None


def test_unclaimed_fails_a_drain_but_not_a_bounded_run():
    logs = [log(0, (1, 1, 0.1, 0.2, DONE))]
    assert judge(logs, 1, 3, drained=True).unclaimed_jobs == 2
    assert not judge(logs, 1, 3, drained=True).exactly_once
    assert judge(logs, 1, 3, drained=False).exactly_once


def test_unexpected_ids_fail_the_run():
    v = judge([log(0, (1, 1, 0.1, 0.2, DONE), (99, 1, 0.1, 0.2, DONE))], 1, 1, drained=True)
    assert v.unexpected_jobs == 1 and not v.exactly_once
    assert v.unique_jobs_claimed == 2 and v.extra_claims == 0


def test_evidence_times_are_relative_to_the_origin():
    v = judge([log(0, (1, 1, 10.5, 11.0, DONE)), log(1, (1, 2, 10.75, 11.5, DONE))], 1, 1, drained=True, origin=10.0)
    assert [c.claimed_at_s for c in v.violations[0].claims] == [0.5, 0.75]


histories = st.lists(st.tuples(st.integers(0, 3), st.integers(1, 12), st.floats(0, 10)), max_size=60)


@given(histories)
def test_counts_agree_with_a_brute_force_count(claims):
    """Property: the ledger's counts equal a direct count over the same history."""
    logs = {}
    for worker, job, at in claims:
        logs.setdefault(worker, log(worker)).record(job, 1, at, at + 1, DONE)
    v = judge(list(logs.values()), 1, 10, drained=True)
    jobs = [job for _, job, _ in claims]
    seen = set(jobs)
    assert v.claims == len(jobs)
    assert v.unique_jobs_claimed == len(seen)
    assert v.extra_claims == len(jobs) - len(seen)
    assert v.double_claimed_jobs == sum(1 for j in seen if jobs.count(j) > 1 and j <= 10)
    assert v.unexpected_jobs == sum(1 for j in seen if j > 10)
    assert v.unclaimed_jobs == 10 - len(seen & set(range(1, 11)))
    assert v.exactly_once == (len(jobs) == len(seen) and seen == set(range(1, 11)))


def test_evidence_is_in_attempt_order_when_client_clocks_disagree():
    # Worker 1's claim (attempt 3) was acknowledged before worker 2's (attempt 2) reached its client.
    v = judge([log(0, (1, 1, 0.1, None, LIVE)), log(1, (1, 3, 0.2, None, LIVE)), log(2, (1, 2, 0.25, None, LIVE))],
              1, 1, drained=True)
    assert [c.attempt for c in v.violations[0].claims] == [1, 2, 3]


from pg_claimcheck.verdict.ledger import FAILED, Reap


def test_reclaim_after_the_reaper_returned_the_job_is_a_redelivery():
    # w0 stalls past its lease; the reaper returns attempt 1 at 5.0; w1 claims attempt 2.
    # w0's fenced completion at 7.0 changes no row (STALE): at-least-once, no violation.
    logs = [log(0, (1, 1, 0.1, 7.0, STALE)), log(1, (1, 2, 5.5, 6.0, DONE))]
    v = judge(logs, 1, 1, drained=True, reaps=[Reap(1, 1, 5.0)])
    assert v.exactly_once and v.redeliveries == 1 and v.double_claimed_jobs == 0
    assert v.stale_completions == 1 and v.stale_completion_violations == 0


def test_unfenced_completion_after_the_reap_is_a_stale_completion_violation():
    logs = [log(0, (1, 1, 0.1, 7.0, DONE)), log(1, (1, 2, 5.5, 6.0, DONE))]
    v = judge(logs, 1, 1, drained=True, reaps=[Reap(1, 1, 5.0)])
    assert not v.exactly_once
    assert v.stale_completion_violations == 1 and v.double_claimed_jobs == 0
    (violation,) = v.violations
    assert violation.kind == "stale-completion" and violation.claims[0].reaped_at_s == 5.0


def test_reclaim_after_a_failure_is_a_retry():
    logs = [log(0, (1, 1, 0.1, 0.2, FAILED)), log(1, (1, 2, 0.5, 0.6, DONE))]
    v = judge(logs, 1, 1, drained=True)
    assert v.exactly_once and v.redeliveries == 1


def test_reclaim_while_the_reaper_took_a_later_attempt_is_still_a_double_claim():
    # The reaper returned attempt 2, not attempt 1: attempt 1 was still live when 2 was claimed.
    logs = [log(0, (1, 1, 0.1, None, LIVE)), log(1, (1, 2, 0.2, None, LIVE)), log(2, (1, 3, 9.0, 9.5, DONE))]
    v = judge(logs, 1, 1, drained=True, reaps=[Reap(1, 2, 8.0)])
    assert v.double_claimed_jobs == 1 and v.violations[0].kind == "concurrent"


def test_a_reap_after_the_reclaim_does_not_excuse_it():
    # Attempt 1 was reaped only at 9.0, after attempt 2 had been claimed at 0.5: a double claim.
    logs = [log(0, (1, 1, 0.1, None, LIVE)), log(1, (1, 2, 0.5, 0.6, DONE))]
    assert judge(logs, 1, 1, drained=True, reaps=[Reap(1, 1, 9.0)]).double_claimed_jobs == 1


def test_finished_jobs_are_counted_from_the_ledger_once_each():
    # A queue that deletes what it finished: the claim completes the job; a re-claim is not a second job done.
    v = judge([log(0, (1, 1, 0.1, 0.1, CLAIM_IS_COMPLETION), (2, 1, 0.1, 0.1, CLAIM_IS_COMPLETION)),
               log(1, (2, 1, 0.2, 0.2, CLAIM_IS_COMPLETION), (3, 1, 0.2, None, LIVE))], 1, 3, drained=False)
    assert v.jobs_finished == 2


def test_a_completion_that_changed_no_row_where_nothing_releases_is_never_finished():
    logs = [log(0, (1, 1, 0.1, 0.2, STALE), (2, 1, 0.1, 0.3, DONE))]
    v = judge(logs, 1, 2, drained=True, releases=False)
    assert v.never_finished == 1 and not v.exactly_once and v.jobs_finished == 1
    assert [(x.job, x.kind) for x in v.violations] == [(1, "never-finished")]
    # With a reaper or failures a fenced completion is the fence working, not a broken queue.
    assert judge(logs, 1, 2, drained=True, releases=True).exactly_once


def test_a_job_handed_out_thousands_of_times_is_judged_quickly_with_capped_evidence():
    many = log(0, *[(1, i, i * 1e-4, i * 1e-4, CLAIM_IS_COMPLETION) for i in range(1, 20_001)])
    v = judge([many], 1, 1, drained=False)
    (violation,) = v.violations
    assert v.double_claimed_jobs == 1 and violation.kind == "after-done"
    assert violation.times_claimed == 20_000 and len(violation.claims) == 50


def test_evidence_of_text_keys_shows_the_key_and_finds_the_reap_by_job_number():
    """The reaper's returns are by job number; the evidence shows the job's key. With text keys the two
    differ, and the reap must still be found (it was looked up by the key once)."""
    from pg_claimcheck.contract.keys import KeySpace

    keys = KeySpace.of(["a", "b"], key_is_int=False)
    logs = [log(0, (1, 1, 0.1, 7.0, DONE)), log(1, (1, 2, 5.5, 6.0, DONE))]
    v = judge(logs, 1, 2, drained=False, reaps=[Reap(1, 1, 5.0)], keys=keys)
    (violation,) = v.violations
    assert violation.job == "a" and violation.kind == "stale-completion"
    assert violation.claims[0].reaped_at_s == 5.0
