"""The settings of one run, checked once when built."""
from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import ClassVar

from pg_claimcheck.errors import UsageError


class Mode(StrEnum):
    """How a worker holds a job (docs/contracts.md): a lease on the row, or a lock held across the
    work. A StrEnum: it equals its string (`Mode.LEASE == "lease"`) and is written as it in the JSON."""

    LEASE = "lease"
    LOCK = "lock"


class StopReason(StrEnum):
    """Why a run ended, the JSON's `stopped_by`: its own limit (RunSettings.limit_kind: drained, duration,
    claims-per-worker), or what its coordinator saw (pg_claimcheck.engine.supervisor: stalled, no-progress;
    a proven violation; `time-cap`, the cap a drained run's time has, and `budget`, a run's share of
    `check`'s budget, both reported as `duration`)."""

    DRAINED = "drained"
    DURATION = "duration"
    CLAIMS_PER_WORKER = "claims-per-worker"
    STALLED = "stalled"
    NO_PROGRESS = "no-progress"
    VIOLATION = "violation"
    TIME_CAP = "time-cap"
    BUDGET = "budget"


MODES = tuple(Mode)
WAKEUPS = ("poll", "notify")
MAX_WORKERS = 64
# The bounds of every load option (docs/contracts.md, section 6). Each is far beyond what a run on
# one machine needs; past it a typo would seed for hours, fill a disk, or sleep for days.
MAX_JOBS = 1_000_000
MAX_BATCH = 10_000
MAX_CLAIMS_PER_WORKER = 100_000_000
MAX_MS = 60_000.0
"""--work-ms (each of its numbers) and --poll-ms."""
MAX_RATE = 100_000.0
"""--rate, jobs per second: one producer process does some thousands at most."""
RATE_BACKLOG_JOBS = 100
"""Jobs seeded (or enqueued) before a rate run's producer starts, unless --jobs says otherwise: the queue starts
nearly empty, so pickup latency measures the offered rate, not a backlog the workers drain first (a
20,000-job backlog made a 200 jobs/s run measure the backlog: the producer reached 57 jobs/s)."""
MAX_PRODUCERS = 32
"""--producers: processes sharing one --rate schedule."""
MAX_FAULTS = 32
"""Faults of each kind in one run (a kill starts a replacement worker: the driver's MAX_REPLACEMENTS is this)."""
MAX_SECONDS = 86_400.0
"""--duration, --lease-seconds, --backoff-unit, --backoff-cap and --reap-every: a day."""


def positive(name: str, value: float, *, minimum: float = 1, maximum: float | None = None) -> None:
    """Reject an out-of-range option before anything starts: NaN and infinities are never in range."""
    finite = isinstance(value, int) or math.isfinite(value)
    if not finite or value < minimum or (maximum is not None and value > maximum):
        bound = f"between {_num(minimum)} and {_num(maximum)}" if maximum is not None else f"at least {_num(minimum)}"
        raise UsageError(f"{name} must be {bound}, got {_num(value)}")


def above_zero(name: str, value: float, maximum: float) -> None:
    """As :func:`positive`, for an option that 0 itself is out of range of (a duration, a rate)."""
    if not ((isinstance(value, int) or math.isfinite(value)) and 0 < value <= maximum):
        raise UsageError(f"{name} must be positive and at most {_num(maximum)}, got {_num(value)}")


def _num(value: float) -> str:
    if isinstance(value, int):
        return f"{value:,}"
    if not math.isfinite(value):
        return str(value)
    return f"{int(value):,}" if value.is_integer() else f"{value:g}"


@dataclass(frozen=True)
class WorkTime:
    """How long a worker 'works' on each job: fixed, uniform `LO-HI`, or exponential `exp:MEAN` (ms)."""

    kind: str
    a_ms: float
    b_ms: float = 0.0

    @classmethod
    def parse(cls, text: str) -> "WorkTime":
        text = str(text).strip()
        try:
            if text.startswith("exp:"):
                work = cls("exp", float(text[4:]))
            elif "-" in text.lstrip("-"):
                lo, hi = text.split("-", 1)
                work = cls("uniform", float(lo), float(hi))
                if work.b_ms < work.a_ms:
                    raise ValueError
            else:
                work = cls("fixed", float(text))
        except (ValueError, OverflowError):
            raise UsageError(f"--work-ms {text!r}: expected a number (5), a range (1-10) or exp:MEAN (exp:5)") from None
        if not all(0 <= ms <= MAX_MS for ms in (work.a_ms, work.b_ms)):  # NaN fails this too
            raise UsageError(f"--work-ms {text!r}: work time must be between 0 and {_num(MAX_MS)} ms per job")
        return work

    def draw_s(self, rng: random.Random) -> float:
        if self.kind == "fixed":
            return self.a_ms / 1000
        if self.kind == "uniform":
            return rng.uniform(self.a_ms, self.b_ms) / 1000
        return rng.expovariate(1 / self.a_ms) / 1000 if self.a_ms > 0 else 0.0

    def __str__(self) -> str:
        shown = {"fixed": f"{self.a_ms:g}", "uniform": f"{self.a_ms:g}-{self.b_ms:g}"}
        return shown.get(self.kind, f"exp:{self.a_ms:g}")


@dataclass(frozen=True)
class FaultPlan:
    """How many faults of each kind to inject, spread over the run by progress."""

    kills: int = 2
    """SIGKILL of a worker process mid-job (a replacement worker starts)."""
    terminates: int = 2
    """pg_terminate_backend of a worker's backend mid-transaction (the worker reconnects)."""
    stalls: int = 2
    """A worker sleeps past its lease after a claim, then tries to complete."""
    restarts: int = 1
    """Server restart mid-run (only for a server we started; workers reconnect)."""
    stall_factor: float = 2.5
    """A stall lasts this many leases."""

    @property
    def total(self) -> int:
        return self.kills + self.terminates + self.stalls + self.restarts

    def check(self) -> None:
        for name, count in (("--kills", self.kills), ("--terminates", self.terminates),
                            ("--stalls", self.stalls), ("--restarts", self.restarts)):
            positive(name, count, minimum=0, maximum=MAX_FAULTS)


@dataclass(frozen=True)
class RunSettings:
    """One strategy x setting: how many workers, how many jobs, how they claim and work."""

    workers: int = 16
    jobs: int = 20_000
    batch: int = 10
    mode: Mode = Mode.LEASE
    """`lease`: claim and commit, work outside, complete in a second short transaction.
    `lock`: claim, work and complete in one transaction."""
    work: WorkTime = WorkTime("fixed", 0.0)
    poll_ms: float = 10.0
    """Sleep after a claim that returned nothing while queued jobs remain."""
    lease_seconds: float = 300.0
    duration_s: float | None = None
    """Stop after this long even if the table is not drained."""
    claims_per_worker: int | None = None
    """Stop each worker after this many claim transactions (pgbench's -t)."""
    time_cap_s: float | None = None
    """Stop a run not drained after this long (`stopped_by: duration`, its jobs not reached not lost):
    a planner condition's short run. Unlike `duration_s` it leaves the run one that `drains`: a stall
    ends it as drained (its unclaimed jobs are lost), and the lifecycle check is judged unless the cap
    was reached."""
    fail_rate: float = 0.0
    """Fraction of jobs a worker fails (the strategy's `fail` requeues them with backoff)."""
    backoff_unit_s: float = 10.0
    """The seed's backoff: unit * 2^attempts after a failure (20 s after the first), capped."""
    backoff_cap_s: float = 3600.0
    reap_every_s: float | None = None
    """Run the reaper (expired leases back to the queue) this often; None: no reaper."""
    faults: FaultPlan | None = None
    rate_per_s: float | None = None
    """Open-loop producer: enqueue this many jobs per second while the workers claim (see
    pg_claimcheck.engine.producer); None: the seeded jobs only."""
    produce_s: float | None = None
    """How long the producer enqueues (`--duration` with `--rate`); the workers then drain."""
    producers: int = 1
    """Producer processes sharing the --rate schedule (job i is producer i mod producers')."""
    wakeup: str = "poll"
    """After an empty claim: `poll` sleeps poll_ms; `notify` (with --rate) waits for the producers' NOTIFY
    (see pg_claimcheck.engine.wakeup)."""
    stop_early: bool = False
    """Stop once a violation is proven (`check`'s default; `--drain` turns it off). Applies only where
    nothing releases a claim (no reaper, failures or faults): see pg_claimcheck.engine.watch."""
    max_workers: ClassVar[int] = MAX_WORKERS
    """The fork driver's cap (one process per worker); Locust users have their own."""

    def __post_init__(self) -> None:
        positive("--workers", self.workers, maximum=self.max_workers)
        positive("--jobs", self.jobs, maximum=MAX_JOBS)
        positive("--batch", self.batch, maximum=MAX_BATCH)
        if self.mode not in MODES:
            raise UsageError(f"--mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        object.__setattr__(self, "mode", Mode(self.mode))  # given as a string by the CLI and the API
        positive("--poll-ms", self.poll_ms, minimum=0, maximum=MAX_MS)
        above_zero("--lease-seconds", self.lease_seconds, MAX_SECONDS)
        if self.duration_s is not None:
            above_zero("--duration", self.duration_s, MAX_SECONDS)
        if self.claims_per_worker is not None:
            positive("--claims-per-worker", self.claims_per_worker, maximum=MAX_CLAIMS_PER_WORKER)
        if not (math.isfinite(self.fail_rate) and 0 <= self.fail_rate < 1):
            raise UsageError(f"--fail-rate must be at least 0 and below 1, got {self.fail_rate}")
        positive("--backoff-unit", self.backoff_unit_s, minimum=0, maximum=MAX_SECONDS)
        positive("--backoff-cap", self.backoff_cap_s, minimum=0, maximum=MAX_SECONDS)
        if self.reap_every_s is not None:
            above_zero("--reap-every", self.reap_every_s, MAX_SECONDS)
        if self.faults is not None:
            self.faults.check()
        if self.rate_per_s is not None:
            above_zero("--rate", self.rate_per_s, MAX_RATE)
            if self.produce_s is None:
                raise UsageError("--rate needs --duration: how many seconds the producer enqueues at that rate")
            above_zero("--duration", self.produce_s, MAX_SECONDS)
            positive("--producers", self.producers, maximum=MAX_PRODUCERS)
            if self.rate_per_s * self.produce_s > MAX_JOBS:
                raise UsageError(f"--rate {_num(self.rate_per_s)} for --duration {_num(self.produce_s)} would enqueue "
                                 f"more than {_num(MAX_JOBS)} jobs (the bound of --jobs too); lower one of them")
            if self.duration_s is not None or self.claims_per_worker is not None or self.faults is not None:
                raise UsageError("--rate runs until the producer's --duration ends and the workers drain: it does not "
                                 "combine with --claims-per-worker or --faults")
        if self.wakeup not in WAKEUPS:
            raise UsageError(f"--wakeup must be one of {', '.join(WAKEUPS)}, got {self.wakeup!r}")
        if self.wakeup == "notify" and self.rate_per_s is None:
            raise UsageError("--wakeup notify needs --rate: the producers' enqueues send the notifications")
        if self.rate_per_s is None and self.producers != 1:
            raise UsageError("--producers needs --rate: the producers feed the queue on the --rate schedule")

    @property
    def lifecycle(self) -> bool:
        """Jobs can come back (failures, reaper, faults): a drain waits for every job to be done or failed."""
        return self.fail_rate > 0 or self.reap_every_s is not None or self.faults is not None

    @property
    def limit_kind(self) -> StopReason:
        """How a run that was not stopped ends: `drained`, `duration` or `claims-per-worker`."""
        return (StopReason.DRAINED if self.drains
                else StopReason.DURATION if self.duration_s is not None else StopReason.CLAIMS_PER_WORKER)

    def stall_limit_s(self, base_s: float) -> float:
        """Seconds without a claim (or a finished job) before a run counts as stalled: `base_s`
        plus the work two batches may take."""
        return base_s + 2 * self.batch * max(self.work.a_ms, self.work.b_ms) / 1000

    @property
    def drains(self) -> bool:
        """A run without a time or count limit goes until no job is left: unclaimed jobs then fail it."""
        return self.duration_s is None and self.claims_per_worker is None

    def as_dict(self) -> dict:
        data = asdict(self)
        data["work_ms"] = str(self.work)
        del data["work"]
        data["faults"] = asdict(self.faults) if self.faults else None
        return data
