"""check's time budget (pg_claimcheck.engine.budget): slices, sizing from the short runs, the footer."""
from __future__ import annotations

import time

import pytest

from pg_claimcheck.engine.budget import MAX_BUDGET_JOBS, MIN_RUN_S, UNMEASURED_JOBS, Budget, Spent
from pg_claimcheck.errors import UsageError
from pg_claimcheck.settings import RunSettings


def test_without_a_measured_rate_the_run_as_seeded_gets_the_old_default():
    assert Budget(20).sized(RunSettings(jobs=5)).jobs == UNMEASURED_JOBS


def test_a_slow_claim_gets_fewer_jobs_and_a_fast_one_more():
    slow, fast = Budget(20), Budget(20)
    slow.rates.append((30.0, 4))
    fast.rates.append((1_500.0, 4))
    settings = RunSettings(workers=16, batch=10)
    few, many = slow.sized(settings).jobs, fast.sized(settings).jobs
    assert settings.workers * settings.batch * 5 <= few < many <= MAX_BUDGET_JOBS


def test_a_conditions_slice_is_a_share_of_what_is_left_within_its_bounds():
    budget = Budget(20)
    assert MIN_RUN_S <= budget.condition_slice(4, 5.0) <= 5.0
    spent = Budget(2, started=time.monotonic() - 60)  # the server took it all
    assert spent.condition_slice(4, 5.0) == MIN_RUN_S


def test_the_footer_and_the_json_say_how_it_was_spent():
    budget = Budget(20)
    budget.spent += [Spent("server", 2.0), Spent("as-seeded", 9.5, jobs=30_000, done=21_000, stopped=True)]
    assert "server 2.0s; as-seeded 9.5s, 21,000 of 30,000 jobs done at its share" in budget.footer()
    parts = budget.as_dict()["parts"]
    assert parts[1] == {"what": "as-seeded", "seconds": 9.5, "jobs": 30_000, "done": 21_000, "stopped_at_share": True}


@pytest.mark.parametrize("seconds", [1.0, float("nan"), 10 ** 9])
def test_a_budget_out_of_range_is_refused(seconds):
    with pytest.raises(UsageError, match="--budget must be between"):
        Budget(seconds)
