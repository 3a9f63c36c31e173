"""A check's time budget: as many claims as fit in it, whatever the design's speed (issue 31).

`check` (the pytest plugin, `claimcheck.assert_exactly_once`) is given seconds, not jobs: the server's
start, every planner condition's tables, plan and short run, the run as seeded, and judging them all
come out of one budget. The short runs come first, each with a slice; what they show of the claim's
speed sizes the run as seeded (a slow claim gets fewer jobs, a fast one more), which then runs until
the budget's end less a reserve for judging. A run stopped at its share is stopped at a time limit
(`stopped_by: duration`): its jobs not reached are not lost (docs/contracts.md §2), and it names the
budget in its `stop_reason`. `--jobs N` or `--drain` ask for a fixed size instead: no budget.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

from pg_claimcheck.engine.supervisor import MIN_BUDGET_RUN_S
from pg_claimcheck.errors import UsageError
from pg_claimcheck.settings import MAX_JOBS, MAX_SECONDS, RunSettings

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
"""Seeded for the run as seeded when no short run measured the claim (`--plans none`)."""
MAX_BUDGET_JOBS = 100_000
"""The most a budget seeds: seeding costs budget too (about 1 s per 30,000 jobs on 2 cores)."""
HEADROOM = 2.0
"""Seed this many times the jobs the measured rate would finish: a faster run must not drain early."""
WORKER_SCALE_CAP = 2.0
"""A short run's rate (at most 4 workers) times at most this for more workers: on 2 cores more
workers rarely finish more than twice as many jobs, and a serialized claim finishes none more."""


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
    rates: list[tuple[float, int]] = field(default_factory=list)
    """(jobs/s, workers) of each short run that finished jobs: the claim's measured speed."""

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

    def sized(self, settings: RunSettings) -> RunSettings:
        """The run as seeded's settings: as many jobs as the measured rate finishes in the time left,
        times HEADROOM (the run stops at its deadline, not at the drain); UNMEASURED_JOBS without a rate."""
        if not self.rates:
            return dataclasses.replace(settings, jobs=UNMEASURED_JOBS)
        rate, workers = max(self.rates)
        scale = min(WORKER_SCALE_CAP, max(1.0, settings.workers / workers))
        seconds = max(MIN_BUDGET_RUN_S, self.left() - RESERVE_S)
        floor = min(MAX_JOBS, settings.workers * settings.batch * 5)
        jobs = int(rate * scale * seconds * HEADROOM)
        return dataclasses.replace(settings, jobs=max(floor, min(MAX_BUDGET_JOBS, jobs)))

    def record(self, what: str, seconds: float, result=None) -> None:
        """A part spent; a run's result (pg_claimcheck.verdict.result.RunResult) also measures the claim."""
        if result is None:
            self.spent.append(Spent(what, seconds))
            return
        stopped = result.stopped_by == "duration"
        self.spent.append(Spent(what, seconds, result.seeded.count, result.jobs_done, stopped))
        if result.jobs_done and result.elapsed_s > 0:
            self.rates.append((result.throughput_jobs_per_s, result.settings.workers))

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
