"""What a run observed beside the workers' records, as its result carries it: each worker's telemetry,
the jobs seeded, the faults injected, the lock waits and queue depth sampled, pgbench's run of the same
SQL and the open-loop producers' figures. Plain records with their JSON objects; the engine fills them
(pg_claimcheck.engine.worker and .cycle a worker's telemetry, pg_claimcheck.server.schema seeds,
pg_claimcheck.engine.faults, .sampler, .pgbench, .feedfigures measure). The ledger reads none of it.
"""
from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pg_claimcheck.contract.keys import KeySpace

SAMPLE_INTERVAL_S = 0.05
LAG_LIMIT_S = 1.0
"""A producer whose lag (commit time past the due time) exceeded this did not keep up."""


@dataclass
class WorkerTelemetry:
    """What one worker measured of its run beside its records for the ledger (pg_claimcheck.verdict.ledger
    .WorkerLog): its latencies, counts, errors and times. It reaches the coordinator once, at the worker's
    end (pg_claimcheck.engine.logstream.summary), and is read for the result's figures, never for its verdict."""

    worker: int
    claim_latency_ms: array[float] = field(default_factory=lambda: array("f"))
    """One entry per claim statement that returned jobs, in order."""
    claim_statements: int = 0
    empty_claims: int = 0
    serialization_failures: int = 0
    deadlocks: int = 0
    reconnects: int = 0
    sqlstates: dict[str, int] = field(default_factory=dict)
    """Server errors raised inside claims and completions, by SQLSTATE (each rolled back and retried)."""
    lost_sqlstates: dict[str, int] = field(default_factory=dict)
    """Connections the server ended, by the SQLSTATE it sent as it ended them (25P03: its
    idle_in_transaction_session_timeout); a connection lost without a word is not counted here."""
    started_at: float = 0.0
    finished_at: float = 0.0
    cpu_s: float | None = None
    """CPU time (user + system) the worker process used from its release to its end; None for a
    claimer that shares its process (a Locust user)."""
    error: str | None = None
    drained: bool = False
    """The worker stopped because it found no job left (not at a limit or a stop)."""
    latency_histograms: tuple[bytes, bytes] | None = None
    """A rate run's (pickup, end-to-end) HDR histograms of this worker's claims, encoded (see
    pg_claimcheck.engine.producer)."""
    wakeups: dict[str, int] = field(default_factory=dict)
    """--wakeup notify: how its waits after an empty claim ended, by kind (see pg_claimcheck.engine.wakeup)."""


@dataclass(frozen=True)
class SeededJobs:
    """What seeding produced: ids `first_id..last_id`, every one of them a job."""

    first_id: int
    last_id: int
    count: int
    seconds: float
    """Wall time of the whole table build: create, seed, index, analyze."""
    keys: KeySpace | None = None
    """The seeded keys; None: the integers first_id..last_id."""


@dataclass
class FaultEvent:
    """One injected fault and, after the run, what became of its jobs."""

    kind: str
    at_s: float
    worker: int | None
    detail: str
    jobs: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "at_s": round(self.at_s, 3), "worker": self.worker, "detail": self.detail,
                "jobs": self.jobs}


@dataclass
class WaitSamples:
    """What the sampler saw."""

    samples: int = 0
    events: Counter[str] = field(default_factory=Counter)
    """`"Type/Event"` -> number of (sample, backend) pairs seen waiting on it."""
    max_waiting_workers: int = 0
    """The most backends waiting on a heavyweight lock (`Lock/*`) in one sample."""
    error: str | None = None

    def add(self, waits: list[tuple[Any, ...]]) -> None:
        """One sample: rows of sample_activity, (wait_event_type, wait_event)."""
        self.samples += 1
        on_lock = 0
        for wait_type, wait_event in waits:
            if wait_type:
                self.events[f"{wait_type}/{wait_event}"] += 1
                on_lock += wait_type == "Lock"
        self.max_waiting_workers = max(self.max_waiting_workers, on_lock)


QUEUE_FIELDS = ("queued", "running", "dead_tuples", "table_bytes", "vacuums")
"""One queue sample's figures, in the order of the `sample_queue` query."""


@dataclass
class QueueSamples:
    """What the queue sampler saw: one entry per sample in each list, in time order."""

    at: list[float] = field(default_factory=list)
    """When each sample was taken, on this host's monotonic clock (the workers' clock)."""
    rows: list[tuple[int, ...]] = field(default_factory=list)
    """Each sample's QUEUE_FIELDS."""
    interval_s: float = 0.0
    error: str | None = None

    def series(self, origin: float) -> dict[str, Any]:
        """The JSON's `queue_over_time`: `t_s` (seconds from `origin`, the run's start) and one list per field."""
        columns = list(zip(*self.rows)) if self.rows else [()] * len(QUEUE_FIELDS)
        return {"interval_s": self.interval_s, "t_s": [round(t - origin, 3) for t in self.at],
                **{name: list(values) for name, values in zip(QUEUE_FIELDS, columns)}}

    def summary(self) -> dict[str, Any]:
        """The JSON's `queue_summary`: the deepest queue, the dead tuples at the end and at most, the largest table."""
        if not self.rows:
            return {"samples": 0, "max_depth": None, "final_depth": None, "max_dead_tuples": None,
                    "final_dead_tuples": None, "max_table_bytes": None, "final_table_bytes": None}
        depth, dead, size = ([r[QUEUE_FIELDS.index(name)] for r in self.rows]
                             for name in ("queued", "dead_tuples", "table_bytes"))
        return {"samples": len(self.rows), "max_depth": max(depth), "final_depth": depth[-1],
                "max_dead_tuples": max(dead), "final_dead_tuples": dead[-1],
                "max_table_bytes": max(size), "final_table_bytes": size[-1]}


def status_dicts(rows: Iterable[Sequence[Any]]) -> list[dict[str, Any]]:
    """`table_by_status` in the JSON: a jobs table after a run (ours, or pgbench's), per status; else empty."""
    return [{"status": status, "count": count, "max_attempts": most} for status, count, most in rows]


@dataclass(frozen=True)
class PgbenchResult:
    """One pgbench run of a strategy x setting, or of a library's worker cycle (`pg_claimcheck.libs.parity`)."""

    clients: int
    scripts_per_client: int
    scripts: int
    """Script executions pgbench reports as processed (its 'transactions')."""
    failed: int
    tps: float
    """pgbench's scripts per second, without initial connection time."""
    jobs_done: int
    """Jobs the table shows finished afterwards (status 'done'; a library's own table in its words)."""
    jobs_per_s: float
    script: str
    statements: str = ""
    """For a library: which of its statements the script runs, and where they came from."""
    cpu_s: float = 0.0
    """CPU time (user + system) of the pgbench process: its client cost, next to our workers'."""
    by_status: tuple[Any, ...] = ()
    """(status, count, max attempts) per status of our jobs table after pgbench, as seed 003 prints it."""

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"clients": self.clients, "scripts_per_client": self.scripts_per_client, "scripts": self.scripts,
               "failed": self.failed, "tps": round(self.tps, 1), "jobs_done": self.jobs_done,
               "jobs_per_s": round(self.jobs_per_s, 1), "cpu_s": round(self.cpu_s, 4)}
        if self.statements:
            out["statements"] = self.statements
        if self.by_status:
            out["table_by_status"] = status_dicts(self.by_status)
        return out


@dataclass(frozen=True)
class ProducerFigures:
    """One producer's share of the schedule, and how it kept to it."""

    producer: int
    scheduled: int
    enqueued: int
    max_lag_ms: float
    """Its latest commit past its due time (0 when it enqueued nothing)."""

    @property
    def kept_up(self) -> bool:
        return self.enqueued == self.scheduled and self.max_lag_ms <= LAG_LIMIT_S * 1000

    def as_dict(self) -> dict[str, Any]:
        return {"producer": self.producer, "scheduled_jobs": self.scheduled, "enqueued_jobs": self.enqueued,
                "max_lag_ms": round(self.max_lag_ms, 3), "kept_up": self.kept_up}


@dataclass(frozen=True)
class ProducerOutcome:
    """The producers' figures for the report."""

    rate_per_s: float
    duration_s: float
    scheduled: int
    enqueued: int
    achieved_rate_per_s: float
    max_lag_ms: float
    kept_up: bool
    claimed_before_last_enqueue: int
    """Produced jobs whose first claim committed before the producers' last commit: jobs that arrived mid-run."""
    pickup_latency_ms: dict[str, Any]
    end_to_end_latency_ms: dict[str, Any]
    producers: tuple[ProducerFigures, ...] = ()
    """Each producer's share and lag, by index."""
    wakeups: dict[str, Any] | None = None
    """--wakeup notify: how the workers' waits after an empty claim ended, summed (pg_claimcheck.engine.wakeup); None: poll."""
    committed: list[Any] = field(default_factory=list, repr=False, compare=False)
    """The keys the producers committed, sorted (see pg_claimcheck.engine.feedfigures): the jobs judged beside the seeded ones."""
    clock: str = "this host's monotonic clock: the producers and the workers are processes on it"

    @property
    def behind(self) -> str | None:
        """Why the producers did not keep up, in words, or None."""
        if self.kept_up:
            return None
        if len(self.producers) <= 1:
            return (f"the producer could not keep up with --rate {self.rate_per_s:g}: "
                    + lagging(self.scheduled, self.enqueued, self.max_lag_ms)
                    + f" (achieved {self.achieved_rate_per_s:,.1f} jobs/s)")
        late = [f for f in self.producers if not f.kept_up]
        n = len(self.producers)
        return (f"{len(late)} of {n} producers could not keep up with --rate {self.rate_per_s:g} "
                f"({self.rate_per_s / n:g} jobs/s each): "
                + "; ".join(f"producer {f.producer}: {lagging(f.scheduled, f.enqueued, f.max_lag_ms)}" for f in late)
                + f" (achieved {self.achieved_rate_per_s:,.1f} jobs/s in all)")

    def as_dict(self) -> dict[str, Any]:
        return {"offered_rate_per_s": self.rate_per_s, "achieved_rate_per_s": round(self.achieved_rate_per_s, 3),
                "producer_duration_s": self.duration_s, "scheduled_jobs": self.scheduled,
                "enqueued_jobs": self.enqueued, "producer_max_lag_ms": round(self.max_lag_ms, 3),
                "producer_kept_up": self.kept_up, "producer_behind": self.behind,
                "producers": [f.as_dict() for f in self.producers],
                "wakeup": {"kind": "poll"} if self.wakeups is None else {"kind": "notify", **self.wakeups},
                "claimed_before_last_enqueue": self.claimed_before_last_enqueue,
                "pickup_latency_ms": self.pickup_latency_ms, "end_to_end_latency_ms": self.end_to_end_latency_ms,
                "latency_clock": self.clock}


def lagging(scheduled: int, enqueued: int, max_lag_ms: float) -> str:
    missing = scheduled - enqueued
    parts = [f"{missing:,} of {scheduled:,} scheduled jobs were not enqueued by the end of --duration "
             f"plus {LAG_LIMIT_S:g} s"] if missing else []
    if max_lag_ms > LAG_LIMIT_S * 1000:
        parts.append(f"its lag behind the schedule reached {max_lag_ms:,.0f} ms")
    return "; ".join(parts)
