"""A check's time budget: as many claims as fit in it, whatever the design's speed (issue 31).

`check` (the pytest plugin, `claimcheck.assert_exactly_once`) is given seconds, not jobs: the server's
start, every planner condition's tables, plan and short run, the run as seeded, and judging them all
come out of one budget. The short runs come first, each with a slice. Then sizing runs measure the claim
where the run as seeded will run it, at its own workers, on a small table and, when the run would be
larger, on a larger one; from the speed at the two sizes the run as seeded is sized (a slow claim gets
fewer jobs, a fast one more, one that slows as the queue grows fewer still), and it then runs until the
budget's end less a reserve for judging. A run stopped at its share is stopped at a time limit
(`stopped_by: duration`): its jobs not reached are not lost (docs/contracts.md §2), and it names the
budget in its `stop_reason`. `--jobs N` or `--drain` ask for a fixed size instead: no budget.
"""
from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pg_claimcheck.engine.supervisor import MIN_BUDGET_RUN_S
from pg_claimcheck.errors import UsageError
from pg_claimcheck.settings import MAX_JOBS, MAX_SECONDS, RunSettings

if TYPE_CHECKING:
    from pg_claimcheck.verdict.power import Power
    from pg_claimcheck.verdict.result import RunResult

DEFAULT_BUDGET_S = 20.0
"""`check`'s default: about what a skip-locked check took at 20,000 jobs on 2 cores."""
MIN_BUDGET_S = 2.0
RESERVE_S = 1.0
"""Kept back at the end for judging, the table outcome and the report."""
CONDITIONS_SHARE = 0.4
"""At most this part of what is left when the conditions start goes to their short runs."""
MIN_RUN_S = 1.0
"""A condition's short run gets at least this long (its time cap), even when the budget is spent: a
verdict needs some claims."""
UNMEASURED_JOBS = 20_000
"""Seeded for the run as seeded when nothing measured the claim (a caller that skipped `measure`)."""
MAX_BUDGET_JOBS = 100_000
"""The most a budget seeds: seeding costs budget too (about 1 s per 30,000 jobs on 2 cores)."""
HEADROOM = 2.0
"""Seed this many times the jobs the measured rate would finish: a faster run must not drain early."""
SIZING_JOBS = 300
"""The first sizing run's table (at least five batches): the planner conditions' size, drained by a fast
claim in a fraction of a second."""
SIZING_GROWTH = 8
"""The second sizing run's table, at most this many times the first's: large enough for a claim whose
cost grows with the queue to show it (procrastinate 3.8's fetch, 4 workers: 1,400 jobs/s on 300 jobs,
11 on 10,000), small enough to stay cheap when it does."""
SIZING_S = 1.0
"""A sizing run's time cap from its workers' release: a fast claim drains its table sooner."""
MAX_GROWTH_EXPONENT = 2.0
"""The steepest growth assumed: a claim whose cost grows as the square of the queue's length (one that
checks each queued row against the others). Also the growth assumed past a size at which no job finished."""


def check_budget(seconds: float) -> None:
    if not (isinstance(seconds, (int, float)) and MIN_BUDGET_S <= seconds <= MAX_SECONDS):  # NaN fails too
        raise UsageError(f"--budget must be between {MIN_BUDGET_S:g} and {MAX_SECONDS:,.0f} seconds, got {seconds}")


@dataclass
class Spent:
    """One part of the budget: a condition's run (or the server's start, `server`)."""

    what: str
    seconds: float
    jobs: int = 0
    """Jobs seeded for it."""
    done: int = 0
    stopped: bool = False
    """Stopped at its share of the budget (its queue not drained)."""

    def as_dict(self) -> dict:
        return {"what": self.what, "seconds": round(self.seconds, 3), "jobs": self.jobs, "done": self.done,
                "stopped_at_share": self.stopped}


@dataclass
class Budget:
    """Seconds for a whole check, from `started` (monotonic; before the server starts)."""

    seconds: float
    started: float = field(default_factory=time.monotonic)
    spent: list[Spent] = field(default_factory=list)
    measured: list[tuple[int, float]] = field(default_factory=list)
    """(jobs seeded, jobs/s) of each sizing run: the claim's speed at the run's own workers, by table size."""
    looked: list[Power] = field(default_factory=list)
    """The sizing runs' power figures: judged runs of the claim at the run's own settings, so their
    overlapping claims count in the check's power (a sizing run costs the run as seeded jobs)."""

    def __post_init__(self) -> None:
        check_budget(self.seconds)

    @property
    def end(self) -> float:
        return self.started + self.seconds

    def left(self, now: float | None = None) -> float:
        return self.end - (time.monotonic() if now is None else now)

    def condition_slice(self, conditions_left: int, cap_s: float) -> float:
        """How long a condition's short run may go from its workers' release (its time cap): its slice
        of the conditions' share, at most `cap_s`, at least MIN_RUN_S."""
        share = (self.left() - RESERVE_S) * CONDITIONS_SHARE / max(1, conditions_left)
        return max(MIN_RUN_S, min(cap_s, share))

    def final_deadline(self) -> float:
        """When the run as seeded stops: the budget's end less the reserve. Its floor is the supervisor's
        (MIN_BUDGET_RUN_S from the workers' release, which comes after this call and its seeding)."""
        return self.end - RESERVE_S

    def measure(self, settings: RunSettings, run_at: Callable[[RunSettings], RunResult]) -> RunResult | None:
        """The sizing runs before the run as seeded: `run_at` seeds and runs one (`settings` with its jobs
        and time cap). Each is a judged run: the first that violated exactly-once is returned, to stand for
        the run as seeded (a job handed out twice on a small table is one on any). One that made no progress
        is a measurement (no job finishes at that size), not the check's verdict: its size was ours."""
        self.measured.clear()  # another setting of the same check (its workers, its batch) measures anew
        while (jobs := self._next_sizing(settings)) is not None:
            started = time.perf_counter()
            result = run_at(dataclasses.replace(settings, jobs=jobs, time_cap_s=SIZING_S))
            self.record(f"sizing {jobs:,}", time.perf_counter() - started, result)
            self.measured.append((result.seeded.count, result.throughput_jobs_per_s))
            if result.power is not None:
                self.looked.append(result.power)
            if result.violated:
                return result
        return None

    def _next_sizing(self, settings: RunSettings) -> int | None:
        """The next sizing run's jobs, or None when what is measured sizes the run as seeded: after the
        small table, a larger one only when the run as seeded would be more than twice its size."""
        first = max(SIZING_JOBS, 5 * settings.batch)
        if not self.measured:
            return first
        if len(self.measured) > 1 or not self.measured[0][1]:
            return None
        wanted = self._fit()
        return min(wanted, first * SIZING_GROWTH) if wanted > 2 * first else None

    def sized(self, settings: RunSettings) -> RunSettings:
        """The run as seeded's settings: as many jobs as the measured speed finishes in the time left, times
        HEADROOM (the run stops at its deadline, not at the drain); UNMEASURED_JOBS without a measure."""
        if not self.measured:
            return dataclasses.replace(settings, jobs=UNMEASURED_JOBS)
        # Five batches per worker, unless even the smallest table measured is more than the claim can take.
        floor = min(MAX_JOBS, settings.workers * settings.batch * 5, min(n for n, _ in self.measured))
        return dataclasses.replace(settings, jobs=max(floor, min(MAX_BUDGET_JOBS, self._fit())))

    def _fit(self) -> int:
        """The table the measured speed fills for the time left. A claim's speed at one size says little of
        its speed at another: one that reads each queued row gets slower as the queue grows (procrastinate
        3.8's fetch at 16 workers finished 10 jobs/s on 300 jobs and 1 on 1,000; sized from the short runs'
        300-job tables at 4 workers, its 36,000-job run finished none within the no-progress limit). So the
        rate `r` at the largest table `n` that finished jobs is taken to fall as (N/n)^-k beyond it, `k` read
        from the two sizes measured (0 for a claim whose cost does not grow, MAX_GROWTH_EXPONENT past a size
        at which nothing finished), and the run gets the N for which N = HEADROOM x seconds x r(N)."""
        seconds = max(MIN_BUDGET_RUN_S, self.left() - RESERVE_S)
        progressed = sorted((n, r) for n, r in self.measured if r > 0)
        if not progressed:  # nothing finished: the smallest table again, and its run's verdict says why
            return min(n for n, _ in self.measured)
        (n0, r0), (n, r) = progressed[0], progressed[-1]
        if any(m > n for m, rate in self.measured if not rate):
            k = MAX_GROWTH_EXPONENT
        elif n > n0:
            k = min(MAX_GROWTH_EXPONENT, max(0.0, math.log(r0 / r) / math.log(n / n0)))
        else:
            k = 0.0
        return int((HEADROOM * seconds * r * n ** k) ** (1 / (1 + k)))

    def record(self, what: str, seconds: float, result=None) -> None:
        """A part spent, with its run's result (pg_claimcheck.verdict.result.RunResult) if it ran one."""
        if result is None:
            self.spent.append(Spent(what, seconds))
            return
        stopped = result.stopped_by == "duration"
        self.spent.append(Spent(what, seconds, result.seeded.count, result.jobs_done, stopped))

    def as_dict(self) -> dict:
        """The JSON report's `budget`."""
        used = time.monotonic() - self.started
        return {"seconds": self.seconds, "used_s": round(used, 3), "parts": [s.as_dict() for s in self.spent]}

    def footer(self) -> str:
        """How the budget was spent, in one line under the table."""
        used = time.monotonic() - self.started
        parts = []
        for s in self.spent:
            jobs = f", {s.done:,} of {s.jobs:,} jobs done" + (" at its share" if s.stopped else "") if s.jobs else ""
            parts.append(f"{s.what} {s.seconds:.1f}s{jobs}")
        return (f"budget {self.seconds:g}s, {used:.1f}s used: {'; '.join(parts)}. --budget SECONDS to change it; "
                "--jobs N or --drain for a fixed size")
