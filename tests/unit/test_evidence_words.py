"""Evidence a person can read: jobs by their place in the run's keys, contract §2's words for each
outcome, and a plan without a row lock called that, with its fix."""
from types import SimpleNamespace

from pg_claimcheck.plans.table import plan_words
from pg_claimcheck.server.schema import job_words, key_base
from pg_claimcheck.verdict.ledger import OUTCOME_NAMES, STALE
from pg_claimcheck.verdict.planshape import NO_LOCK_ADVICE, PlanShape


def test_a_job_of_the_runs_own_key_range_is_named_by_its_place_in_it():
    base = key_base("f80eab01")  # a run's first key: a 64-bit number nobody reads
    assert job_words(base, base) == "job 1" and job_words(base + 9, base) == "job 10"
    # The user's own keys, as the claim returned them: small ids, ids outside the run's range, text.
    assert job_words(5, 1) == "job 5" and job_words(base + 9, 1) == f"job {base + 9}"
    assert job_words("6f1c", base) == "job 6f1c"


def test_a_completion_that_changed_no_row_is_not_called_stale():
    # Contract §2: a stale completion CHANGED the row after its claim was released; one that changed
    # no row was fenced off and is only counted.
    assert OUTCOME_NAMES[STALE] == "changed no row"


def test_a_plan_without_a_row_lock_is_not_said_to_be_safe_and_gets_the_fix():
    unlocked = PlanShape("Update -> Nested Loop -> Limit", "Update on jobs", locks=False)
    assert plan_words(SimpleNamespace(shape=unlocked)) == "no row lock (Nested Loop)"
    assert unlocked.advice == NO_LOCK_ADVICE and "no LockRows" in unlocked.why[0]
    locked = PlanShape("Update -> Nested Loop -> Limit -> LockRows", "Update on jobs")
    assert plan_words(SimpleNamespace(shape=locked)) == "limit runs once (Nested Loop)" and locked.advice is None
