"""What a coordinator and its claimers share while a run goes: typed protocols, three homes.

The fork driver's workers share memory with it (`multiprocessing` Values and Arrays, one slot per
worker, one writer each); a Locust user shares its process with its runner (plain Python values);
a library's worker is another program, which reads its stall switch as a flag file
(pg_claimcheck.libs.runner). Each satisfies the same two protocols, so the worker loop, the producer
and the fault injector read and write them the same way whichever coordinator runs them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, TypeVar

T = TypeVar("T")

STALL_ASKED, STALLED, STALL_ENDED = 1, 2, 3
"""A stall switch's values: 0 none; the injector asks a worker to stall after a claim (1): its next
one (a library's worker), or the first once the run's claims reach the worker's Shared.stall_at (a
fork worker); the worker says it is asleep on a job (2), so the fault report knows the job it held
(Shared.stalled_job), and that it woke and finished that job (3), so a worker that took the job
meanwhile knows the sleeper's completion has happened (pg_claimcheck.engine.cycle)."""


class Cell(Protocol[T]):
    """One shared value (`multiprocessing.Value`, or a plain holder in one process)."""

    value: T


class Slots(Protocol):
    """One value per worker, indexed by worker number (`multiprocessing.Array`, a dict, flag files)."""

    def __getitem__(self, worker: int) -> int: ...

    def __setitem__(self, worker: int, value: int) -> None: ...


class SlotArray(Slots, Protocol):
    """Slots of a fixed number of workers (`multiprocessing.Array`): a worker can look at all of them."""

    def __len__(self) -> int: ...


class Times(Protocol):
    """One time (monotonic seconds) per worker, indexed by worker number (`multiprocessing.Array` of doubles)."""

    def __getitem__(self, worker: int) -> float: ...

    def __setitem__(self, worker: int, value: float) -> None: ...


@dataclass
class Local:
    """A Cell for claimers that share their coordinator's process (Locust users, tests)."""

    value: float = 0


class Producing:
    """Which producers may still enqueue: one flag each, cleared by its producer after its last commit
    (or by the coordinator, for one that died first). Read as `.value`, 1 while any may, as the workers
    read it: an empty queue then is not drained."""

    def __init__(self, ctx, producers: int) -> None:
        self.flags = ctx.Array("b", [1] * producers, lock=False)

    @property
    def value(self) -> int:
        return 1 if any(self.flags) else 0


@dataclass
class Shared:
    """Shared state between the coordinator and the claimers (one slot per worker, one writer each)."""

    stop: Cell[int]
    """Set to 1 by the coordinator (or a claimer's own timer): every claimer ends after its cycle."""
    progress: Slots
    """Jobs claimed so far, per worker: the coordinator's progress bar and stall detector."""
    stall: Slots | None = None
    """The fault injector's switch per worker (see STALL_ASKED); None: no faults in this run."""
    stalled_job: SlotArray | None = None
    """The job a worker stalled on, for the fault report and for a worker that takes it meanwhile."""
    stall_at: Slots | None = None
    """The run's claims (all workers' progress) at which a worker asked to stall does so: set by the
    injector before the run starts, so a stall lands at its mark however fast the run drains (a
    coordinator's tick comes too late for a run that drains in less)."""
    stalled_at: Times | None = None
    """When (monotonic) a worker fell asleep on its stalled job: the fault's time in the report."""
    feed_start: Cell[float] | None = None
    """The producer's schedule start (monotonic), written once it is released."""
    producing: "Producing | None" = None
    """1 (`.value`) while an open-loop producer may still enqueue (see pg_claimcheck.engine.producer): an
    empty queue then is not drained."""

    def claimed(self) -> int:
        """The run's claims so far: every worker's progress (a fork run's `multiprocessing.Array`)."""
        return sum(self.progress)  # type: ignore[call-overload]

    @classmethod
    def forked(cls, ctx, slots: int, *, producers: int) -> Shared:
        """Shared memory for `slots` forked workers (the first ones and their replacements)."""
        return cls(stop=ctx.Value("b", 0, lock=False), progress=ctx.Array("q", slots, lock=False),
                   stall=ctx.Array("b", slots, lock=False), stalled_job=ctx.Array("q", slots, lock=False),
                   stall_at=ctx.Array("q", slots, lock=False), stalled_at=ctx.Array("d", slots, lock=False),
                   producing=Producing(ctx, producers),
                   feed_start=ctx.Value("d", float("nan"), lock=False))

    @classmethod
    def local(cls) -> Shared:
        """For claimers in the coordinator's own process: a stop flag and a progress dict."""
        return cls(stop=Local(0), progress={})

