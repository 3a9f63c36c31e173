"""The open-loop producer: one process that enqueues jobs on a schedule fixed in advance while the workers claim.

Job i (0-based) is due at `start + i / rate`; `start` is the producer's release from the run's
barrier, on this host's monotonic clock (the workers' clock too: every process of a fork run is on
this host, and CLOCK_MONOTONIC is system-wide). An enqueue that is late is late: it is sent at
once, never skipped and never moved, so the next one keeps its own due time and a slow server
cannot hide its slowness by slowing the load (pgbench --rate's model). Every job due within
`duration` is sent, late or not, until `duration + LAG_LIMIT_S`: then the producer stops, and jobs it
had not enqueued by then are reported as not enqueued (it fell behind), never dropped silently.

Keys: the producer's keys are reserved before the run, right after the seeded ones
(`first_key .. first_key + count - 1`), and inserted with explicit ids in order, one job per
transaction. So the ledger's range is known up front (the watch proves on it mid-run) and, since
the producer commits in key order, the keys it did commit are exactly `first_key ..
first_key + enqueued - 1`: the range judged after the run.

Latency (:meth:`ProducerPlan.histograms`, recorded in each worker's process and merged by
:func:`merged`) is measured from each job's *scheduled* time, so it includes the producer's own
lag (coordinated-omission free by construction; no HDR correction is applied on top).
"""
from __future__ import annotations

import math
import threading
import time
from array import array
from dataclasses import dataclass, field

import psycopg
from hdrh.histogram import HdrHistogram

from claimcheck.contract.queries import QUERIES
from claimcheck.contract.strategy import Strategy, execute_section
from claimcheck.engine.worker import BARRIER_TIMEOUT_S
from claimcheck.server import interrupts
from claimcheck.server.runcontext import RunContext
from claimcheck.verdict.ledger import CLAIM_IS_COMPLETION, DONE, WorkerLog

LAG_LIMIT_S = 1.0
"""A producer whose lag (commit time past the due time) exceeded this did not keep up."""
STOP_POLL_S = 0.1
"""The longest the producer sleeps towards a due time without looking at the run's stop flag (the
driver's MONITOR_INTERVAL_S is as long): a run stopped at a proven violation does not wait for it."""
HISTOGRAM_MAX_US = 3_600_000_000  # an hour, in microseconds
HISTOGRAM_DIGITS = 3


@dataclass(frozen=True)
class ProducerPlan:
    run: RunContext
    strategy: Strategy
    rate_per_s: float
    duration_s: float
    first_key: int

    @property
    def scheduled(self) -> int:
        """Jobs due within the duration: i / rate < duration."""
        return max(1, math.ceil(self.rate_per_s * self.duration_s - 1e-9))

    @property
    def last_key(self) -> int:
        return self.first_key + self.scheduled - 1

    def due_at(self, start: float, job) -> float | None:
        """A produced job's scheduled enqueue time (`start` is the producer's), or None for a seeded job."""
        k = job - self.first_key if isinstance(job, int) else -1
        return start + k / self.rate_per_s if 0 <= k < self.scheduled else None

    def histograms(self, start: float, log: WorkerLog) -> tuple[bytes, bytes] | None:
        """A worker's own (pickup, end-to-end) HDR histograms, encoded, at its end: every claim it made of a
        produced job, from the job's scheduled time to the claim's commit and to its finish (microseconds).
        None if the producer never started (`start` is NaN)."""
        if math.isnan(start):
            return None
        pickup, end_to_end = _histogram(), _histogram()
        for job, claimed, ended, how in zip(log.job, log.claimed_at, log.ended_at, log.outcome):
            due = self.due_at(start, job)
            if due is not None:
                _record(pickup, claimed - due)
                if how in (DONE, CLAIM_IS_COMPLETION):
                    _record(end_to_end, ended - due)
        return pickup.encode(), end_to_end.encode()


@dataclass
class ProducerLog:
    """What the producer did, sent to the coordinator when it ends."""

    started_at: float = math.nan
    committed_at: array = field(default_factory=lambda: array("d"))
    """Commit time of job i (in key order); its due time is started_at + i / rate."""
    error: str | None = None

    @property
    def enqueued(self) -> int:
        return len(self.committed_at)


def enqueue(conn: psycopg.Connection, strategy: Strategy, key: int) -> None:
    """One job with key `key`, in its own transaction: the file's `enqueue` section, or our jobs table's.
    The section must return the key it created, one row."""
    if strategy.has("enqueue"):
        with conn.transaction():
            rows = execute_section(conn, strategy, "enqueue", {"key": key}).fetchall()
    else:  # one statement on an autocommit connection is its own transaction: one round trip, not three
        rows = conn.execute(QUERIES["enqueue_job"], {"key": key}, prepare=True).fetchall()
    if [tuple(r) for r in rows] != [(key,)]:
        raise ValueError(f"section 'enqueue' returned {rows[:3]!r} for key {key}; it must create the job with "
                         "key %(key)s and return that key, one row (INSERT ... RETURNING id)")


def producer_main(plan: ProducerPlan, barrier, shared, sender) -> None:
    """The producer process: connect, wait at the barrier, enqueue on schedule until the duration ends."""
    interrupts.child_process_setup()
    log = ProducerLog()
    try:
        try:
            conn = plan.run.connect("producer")
        except psycopg.Error as exc:
            log.error = f"the producer could not connect: {exc}"
            barrier.abort()
            return
        with conn:
            try:
                barrier.wait(BARRIER_TIMEOUT_S)
            except threading.BrokenBarrierError:
                return  # broken by a worker that could not start: its error is the run's, not ours
            start = log.started_at = shared.feed_start.value = time.monotonic()  # before any job exists
            end = start + plan.duration_s + LAG_LIMIT_S  # a late job is sent late; one later than this is not sent
            clock, sleep, rate, stop = time.monotonic, time.sleep, plan.rate_per_s, shared.stop
            for i in range(plan.scheduled):
                due, now = start + i / rate, clock()
                while due > now and not stop.value:  # a low --rate's wait is seconds: the stop may come first
                    sleep(min(due - now, STOP_POLL_S))
                    now = clock()
                if stop.value or now >= end:
                    break  # what is not enqueued by then is reported as not enqueued
                enqueue(conn, plan.strategy, plan.first_key + i)
                log.committed_at.append(clock())
    except Exception as exc:  # reported by the coordinator: the run is not judged without its producer
        log.error = f"the producer failed: {exc}"
    finally:
        shared.producing.value = 0  # only after its last commit: a worker that sees 0 then finds the queue empty is drained
        sender.send(("producer", log))
        sender.close()


class ProducerProcess:
    """The coordinator's side of the producer: its process, the pipe its log comes back on.
    Started when made: make it inside interrupts.deferred() and keep it there, or a Ctrl-C mid-fork
    leaves it untracked (as the driver's workers)."""

    def __init__(self, ctx, plan: ProducerPlan, barrier, shared) -> None:
        self.receiver, sender = ctx.Pipe(duplex=False)
        self.process = ctx.Process(target=producer_main, args=(plan, barrier, shared, sender),
                                   name="claimcheck-producer", daemon=True)
        self.shared, self.log = shared, ProducerLog()
        self.process.start()
        sender.close()

    def watch(self) -> None:
        """A producer dead before its `finally` never cleared `producing`: clear it, so the workers may drain
        (its missing log is reported by receive)."""
        if self.shared.producing.value and not self.process.is_alive():
            self.shared.producing.value = 0

    def receive(self, timeout_s: float) -> bool:
        """Its log, once the workers are done (it ended before they could drain). False if none came."""
        try:
            if self.receiver.poll(timeout_s):
                self.log = self.receiver.recv()[1]
                return True
            self.log.error = "the producer did not report its enqueues"
        except (EOFError, OSError):
            self.log.error = f"the producer died without a word (exit code {self.process.exitcode})"
        return False


@dataclass(frozen=True)
class ProducerOutcome:
    """The producer's figures for the report."""

    rate_per_s: float
    duration_s: float
    scheduled: int
    enqueued: int
    achieved_rate_per_s: float
    max_lag_ms: float
    kept_up: bool
    claimed_before_last_enqueue: int
    """Produced jobs whose first claim committed before the producer's last commit: jobs that arrived mid-run."""
    pickup_latency_ms: dict
    end_to_end_latency_ms: dict
    clock: str = "this host's monotonic clock: the producer and the workers are processes on it"

    @property
    def behind(self) -> str | None:
        """Why the producer did not keep up, in words, or None."""
        if self.kept_up:
            return None
        missing = self.scheduled - self.enqueued
        parts = [f"{missing:,} of {self.scheduled:,} scheduled jobs were not enqueued by the end of --duration "
                 f"plus {LAG_LIMIT_S:g} s"] if missing else []
        if self.max_lag_ms > LAG_LIMIT_S * 1000:
            parts.append(f"its lag behind the schedule reached {self.max_lag_ms:,.0f} ms")
        return (f"the producer could not keep up with --rate {self.rate_per_s:g}: " + "; ".join(parts)
                + f" (achieved {self.achieved_rate_per_s:,.1f} jobs/s)")

    def as_dict(self) -> dict:
        return {"offered_rate_per_s": self.rate_per_s, "achieved_rate_per_s": round(self.achieved_rate_per_s, 3),
                "producer_duration_s": self.duration_s, "scheduled_jobs": self.scheduled,
                "enqueued_jobs": self.enqueued, "producer_max_lag_ms": round(self.max_lag_ms, 3),
                "producer_kept_up": self.kept_up, "producer_behind": self.behind,
                "claimed_before_last_enqueue": self.claimed_before_last_enqueue,
                "pickup_latency_ms": self.pickup_latency_ms, "end_to_end_latency_ms": self.end_to_end_latency_ms,
                "latency_clock": self.clock}


def _histogram() -> HdrHistogram:
    return HdrHistogram(1, HISTOGRAM_MAX_US, HISTOGRAM_DIGITS)


def _summary(h: HdrHistogram) -> dict:
    if h.get_total_count() == 0:
        return {"count": 0, "p50": None, "p95": None, "p99": None, "max": None}
    return {"count": h.get_total_count(), **{f"p{p}": round(h.get_value_at_percentile(p) / 1000, 3)
                                             for p in (50, 95, 99)},
            "max": round(h.get_max_value() / 1000, 3)}


def _record(h: HdrHistogram, seconds: float) -> None:
    h.record_value(max(1, min(HISTOGRAM_MAX_US, round(seconds * 1e6))))


def merged(logs: list[WorkerLog]) -> tuple[HdrHistogram, HdrHistogram]:
    """The workers' (pickup, end-to-end) histograms, each recorded in its own process, merged."""
    pickup, end_to_end = _histogram(), _histogram()
    for w in logs:
        if w.latency_histograms is not None:
            for into, encoded in zip((pickup, end_to_end), w.latency_histograms):
                into.add(HdrHistogram.decode(encoded))
    return pickup, end_to_end


def claimed_mid_run(plan: ProducerPlan, log: ProducerLog, logs: list[WorkerLog]) -> int:
    """Produced jobs whose first claim committed before the producer's last commit."""
    last = log.committed_at[-1] if log.enqueued else -math.inf
    early = set()
    for w in logs:
        for job, claimed in zip(w.job, w.claimed_at):
            if isinstance(job, int) and 0 <= job - plan.first_key < log.enqueued and claimed < last:
                early.add(job)
    return len(early)


def outcome(plan: ProducerPlan, log: ProducerLog, logs: list[WorkerLog]) -> ProducerOutcome:
    pickup, end_to_end = merged(logs)
    early = claimed_mid_run(plan, log, logs)
    lags = [at - (log.started_at + k / plan.rate_per_s) for k, at in enumerate(log.committed_at)]
    max_lag_ms = max(lags, default=0.0) * 1000
    span = (log.committed_at[-1] - log.started_at) if log.enqueued else 0.0
    # Achieved: jobs committed over the schedule's span (the first is due at 0, so n jobs span (n-1)/rate on time).
    achieved = (log.enqueued - 1) / span if log.enqueued > 1 and span > 0 else float(log.enqueued)
    kept_up = log.enqueued == plan.scheduled and max_lag_ms <= LAG_LIMIT_S * 1000
    return ProducerOutcome(rate_per_s=plan.rate_per_s, duration_s=plan.duration_s, scheduled=plan.scheduled,
                           enqueued=log.enqueued, achieved_rate_per_s=achieved, max_lag_ms=max_lag_ms,
                           kept_up=kept_up, claimed_before_last_enqueue=early, pickup_latency_ms=_summary(pickup),
                           end_to_end_latency_ms=_summary(end_to_end))
