"""A queue library is held to the delivery promise its documentation makes (pg_claimcheck.engine.judge.held_to_promise)."""
from pg_claimcheck.engine.judge import held_to_promise
from pg_claimcheck.verdict.ledger import Verdict
from pg_claimcheck.verdict.result import TableOutcome


def verdict(**fields) -> Verdict:
    base = {"claims": 100, "unique_jobs_claimed": 100, "double_claimed_jobs": 0, "extra_claims": 0,
            "unclaimed_jobs": 0, "unexpected_jobs": 0, "stale_completions": 0, "violations": (), "drained": True}
    return Verdict(**{**base, **fields})


def table(queued=0, running=0) -> TableOutcome:
    return TableOutcome(done=100 - queued - running, queued=queued, running=running, failed=0, max_attempts=1)


def test_at_least_once_is_the_ledger_as_it_is():
    v = verdict(unclaimed_jobs=2, redeliveries=3)
    assert held_to_promise(v, table(running=2), "at-least-once", faulted=True) == v
    assert not v.exactly_once  # a lost job fails a library that promised to retry it


def test_at_most_once_excuses_a_job_lost_to_a_fault_and_reports_it():
    held = held_to_promise(verdict(unclaimed_jobs=1), table(running=3), "at-most-once", faulted=True)
    assert held.exactly_once and held.unclaimed_jobs == 0 and held.lost_as_promised == 3


def test_at_most_once_without_a_fault_still_loses_nothing():
    held = held_to_promise(verdict(unclaimed_jobs=1), table(running=1), "at-most-once", faulted=False)
    assert not held.exactly_once and held.lost_as_promised == 0


def test_at_most_once_forbids_a_second_execution_even_after_a_failure():
    held = held_to_promise(verdict(redeliveries=1), table(), "at-most-once", faulted=True)
    assert not held.exactly_once and held.reruns_against_promise == 1
