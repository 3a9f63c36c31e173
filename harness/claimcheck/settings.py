"""The settings of one run, checked once when built."""
from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from typing import ClassVar

from claimcheck.errors import UsageError

MODES = ("lease", "lock")
MAX_WORKERS = 64


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
        except ValueError:
            raise UsageError(f"--work-ms {text!r}: expected a number (5), a range (1-10) or exp:MEAN (exp:5)") from None
        if work.a_ms < 0 or work.b_ms < 0:
            raise UsageError(f"--work-ms {text!r}: work time cannot be negative")
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


@dataclass(frozen=True)
class RunSettings:
    """One strategy x setting: how many workers, how many jobs, how they claim and work."""

    workers: int = 16
    jobs: int = 20_000
    batch: int = 10
    mode: str = "lease"
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
    """Stop a run not drained after this long (`stopped_by: duration`, its jobs not reached not lost);
    unlike `duration_s`, the workers still stop at the drain: a planner condition's short run."""
    fail_rate: float = 0.0
    """Fraction of jobs a worker fails (the strategy's `fail` requeues them with backoff)."""
    backoff_unit_s: float = 10.0
    """The seed's backoff: unit * 2^attempts after a failure (20 s after the first), capped."""
    backoff_cap_s: float = 3600.0
    reap_every_s: float | None = None
    """Run the reaper (expired leases back to the queue) this often; None: no reaper."""
    faults: FaultPlan | None = None
    stop_early: bool = False
    """Stop once a violation is proven (`check`'s default; `--drain` turns it off). Applies only where
    nothing releases a claim (no reaper, failures or faults): see claimcheck.engine.watch."""
    max_workers: ClassVar[int] = MAX_WORKERS
    """The fork driver's cap (one process per worker); Locust users have their own."""

    def __post_init__(self) -> None:
        if not 1 <= self.workers <= self.max_workers:
            raise UsageError(f"--workers must be between 1 and {self.max_workers}, got {self.workers}")
        if self.jobs < 1:
            raise UsageError(f"--jobs must be at least 1, got {self.jobs}")
        if self.batch < 1:
            raise UsageError(f"--batch must be at least 1, got {self.batch}")
        if self.mode not in MODES:
            raise UsageError(f"--mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.poll_ms < 0:
            raise UsageError(f"--poll-ms cannot be negative, got {self.poll_ms}")
        if self.lease_seconds <= 0:
            raise UsageError(f"--lease-seconds must be positive, got {self.lease_seconds}")
        if self.duration_s is not None and self.duration_s <= 0:
            raise UsageError(f"--duration must be positive, got {self.duration_s}")
        if self.claims_per_worker is not None and self.claims_per_worker < 1:
            raise UsageError(f"--claims-per-worker must be at least 1, got {self.claims_per_worker}")
        if not 0 <= self.fail_rate < 1:
            raise UsageError(f"--fail-rate must be at least 0 and below 1, got {self.fail_rate}")
        if self.backoff_unit_s < 0 or self.backoff_cap_s < 0:
            raise UsageError("--backoff-unit and --backoff-cap cannot be negative")
        if self.reap_every_s is not None and self.reap_every_s <= 0:
            raise UsageError(f"--reap-every must be positive, got {self.reap_every_s}")

    @property
    def lifecycle(self) -> bool:
        """Jobs can come back (failures, reaper, faults): a drain waits for every job to be done or failed."""
        return self.fail_rate > 0 or self.reap_every_s is not None or self.faults is not None

    @property
    def limit_kind(self) -> str:
        """How a run that was not stopped ends: `drained`, `duration` or `claims-per-worker`."""
        return "drained" if self.drains else ("duration" if self.duration_s is not None else "claims-per-worker")

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
