"""check's time budget (pg_claimcheck.engine.budget): slices, sizing from the sizing runs, the footer."""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from types import SimpleNamespace

import pytest

from pg_claimcheck.engine.budget import (
    MAX_BUDGET_JOBS,
    MIN_RUN_S,
    SIZING_GROWTH,
    SIZING_JOBS,
    SIZING_S,
    UNMEASURED_JOBS,
    Budget,
    Spent,
)
from pg_claimcheck.errors import UsageError
from pg_claimcheck.settings import RunSettings


def test_without_a_measured_rate_the_run_as_seeded_gets_the_old_default():
    assert Budget(20).sized(RunSettings(jobs=5)).jobs == UNMEASURED_JOBS


def test_a_slow_claim_gets_fewer_jobs_and_a_fast_one_more():
    slow, fast = Budget(20), Budget(20)
    slow.measured.append((300, 30.0))
    fast.measured += [(300, 1_500.0), (2_400, 1_500.0)]
    settings = RunSettings(workers=16, batch=10)
    few, many = slow.sized(settings).jobs, fast.sized(settings).jobs
    assert 300 <= few < many <= MAX_BUDGET_JOBS


def test_a_claim_that_slows_as_the_queue_grows_is_not_given_a_table_it_cannot_finish():
    """procrastinate 3.8's fetch: fast on 300 jobs, 127 times slower on 33 times as many. A constant rate
    would seed tens of thousands of jobs; the growth measured between the two sizes keeps the table near
    the sizes measured."""
    settings = RunSettings(workers=16, batch=10)
    constant, growing = Budget(20), Budget(20)
    constant.measured += [(300, 1_400.0), (2_400, 1_400.0)]
    growing.measured += [(300, 1_400.0), (2_400, 11.0)]
    assert constant.sized(settings).jobs > 20_000
    assert 300 <= growing.sized(settings).jobs < 2_400


def test_past_a_size_where_nothing_finished_the_table_stays_small():
    settings = RunSettings(workers=16, batch=10)
    stuck_above, stuck = Budget(20), Budget(20)
    stuck_above.measured += [(300, 50.0), (2_400, 0.0)]
    stuck.measured.append((300, 0.0))
    assert 300 <= stuck_above.sized(settings).jobs < 2_400
    assert stuck.sized(settings).jobs == 300  # the smallest table again: its run's own verdict says why


@dataclass
class Sized:
    """What `measure` reads of a sizing run's RunResult."""

    jobs: int
    throughput_jobs_per_s: float
    violated: bool = False
    stopped_by: str = "drained"
    power: object = None

    @property
    def seeded(self):
        return SimpleNamespace(count=self.jobs)

    @property
    def jobs_done(self) -> int:
        return self.jobs


def sizing(rates: dict[int, float], violated_at: int | None = None):
    asked = []

    def run_at(settings: RunSettings) -> Sized:
        asked.append((settings.jobs, settings.time_cap_s))
        return Sized(settings.jobs, rates[settings.jobs], violated=settings.jobs == violated_at)
    return asked, run_at


def test_a_fast_claim_is_measured_on_a_small_and_a_larger_table_a_slow_one_on_the_small_only():
    settings = RunSettings(workers=16, batch=10)
    asked, run_at = sizing({SIZING_JOBS: 2_000.0, SIZING_JOBS * SIZING_GROWTH: 2_000.0})
    assert Budget(20).measure(settings, run_at) is None
    assert asked == [(SIZING_JOBS, SIZING_S), (SIZING_JOBS * SIZING_GROWTH, SIZING_S)]
    asked, run_at = sizing({SIZING_JOBS: 10.0})
    budget = Budget(20)
    assert budget.measure(settings, run_at) is None and asked == [(SIZING_JOBS, SIZING_S)]
    assert [p.what for p in budget.spent] == [f"sizing {SIZING_JOBS}"]


def test_a_sizing_run_that_violated_stands_for_the_run_as_seeded():
    asked, run_at = sizing({SIZING_JOBS: 2_000.0}, violated_at=SIZING_JOBS)
    caught = Budget(20).measure(RunSettings(workers=16, batch=10), run_at)
    assert caught is not None and caught.violated and len(asked) == 1


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


def test_the_sizing_runs_power_counts_in_the_checks():
    # A sizing run is a judged run of the claim at the run's settings: its overlapping claims are chances
    # to see a race, and it costs the run as seeded jobs, so the check's power figure counts them.
    from pg_claimcheck.verdict.power import Power, combined

    budget = Budget(20.0)
    looks = iter([Power(300, 280, None, ()), Power(2400, 2000, None, ())])
    budget.measure(RunSettings(workers=16, jobs=1000), lambda s: replace(
        Sized(s.jobs, 3000.0), power=next(looks)))
    assert [p.overlapping for p in budget.looked] == [280, 2000]
    total = combined([Power(5000, 4000, None, ()), *budget.looked])
    assert (total.claims, total.overlapping) == (7700, 6280)
