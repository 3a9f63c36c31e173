"""The open-loop producers: processes that enqueue jobs on a schedule fixed in advance while the workers claim.

Job i (0-based) is due at `start + i / rate`; `start` is the first producer's release from the run's
barrier, on this host's monotonic clock (the workers' clock too: every process of a fork run is on
this host, and CLOCK_MONOTONIC is system-wide). With `--producers N` the schedule is split: job i
is producer `i mod N`'s, and keeps its own due time, so N producers offer the same load as one, each
at rate/N. An enqueue that is late is late: it is sent at once, never skipped and never moved, so
the next one keeps its own due time and a slow server cannot hide its slowness by slowing the load
(pgbench --rate's model). Every job due within `duration` is sent, late or not, until
`duration + LAG_LIMIT_S`: then each producer stops, and jobs it had not enqueued by then are
reported as not enqueued (it fell behind), never dropped silently.

Keys: the producers' keys are reserved before the run, right after the seeded ones
(`first_key .. first_key + scheduled - 1`), and inserted with explicit ids, one job per
transaction; the watch knows the whole reserved range before any is enqueued, and proves on it
mid-run. What was committed is each producer's own report: a producer commits its jobs in its
own order (`p, p + N, p + 2N, ...`), one transaction each, and logs each commit, so producer p
committed exactly its first `enqueued` jobs. With one producer that is a prefix of the range; with
several, one that fell behind leaves gaps between the others' keys, and the ledger judges exactly
the committed keys (pg_claimcheck.engine.fedkeys). The report, not the table, is the source: reading
the keys back from the table at the end would miss jobs a `complete` deletes, and a commit the
producer cannot confirm (its connection lost in COMMIT) fails the producer, which leaves the run
unjudged rather than guessed.

Latency (:meth:`ProducerPlan.histograms`, recorded in each worker's process and merged by
pg_claimcheck.engine.feedfigures, which makes the report's figures) is measured from each job's *scheduled* time, so it includes the producer's own
lag (coordinated-omission free by construction; no HDR correction is applied on top).
"""
from __future__ import annotations

import math
import threading
import time
from array import array
from dataclasses import dataclass, field

import psycopg

from pg_claimcheck.contract.keys import canonical
from pg_claimcheck.contract.queries import QUERIES
from pg_claimcheck.contract.strategy import Strategy, execute_section
from pg_claimcheck.engine.feedfigures import latencies, schedule_start
from pg_claimcheck.engine.worker import BARRIER_TIMEOUT_S
from pg_claimcheck.errors import UsageError
from pg_claimcheck.server import children
from pg_claimcheck.server.runcontext import RunContext
from pg_claimcheck.settings import RunSettings
from pg_claimcheck.verdict.ledger import WorkerLog
from pg_claimcheck.verdict.observed import LAG_LIMIT_S

STOP_POLL_S = 0.1
"""The longest the producer sleeps towards a due time without looking at the run's stop flag (the
driver's MONITOR_INTERVAL_S is as long): a run stopped at a proven violation does not wait for it."""


@dataclass(frozen=True)
class ProducerPlan:
    run: RunContext
    strategy: Strategy
    rate_per_s: float
    duration_s: float
    first_key: int
    producers: int = 1
    """How many producer processes share the schedule (job i is producer i mod producers')."""
    learns_keys: bool = False
    """A file's own tables: its `enqueue` makes the keys (it returns them), none is reserved; see pg_claimcheck.engine.fedkeys."""
    key_is_int: bool = True
    """The claim's key type (learnt keys are compared in its canonical form, pg_claimcheck.contract.keys)."""
    channel: str | None = None
    """`--wakeup notify`: the channel each enqueue notifies in its transaction (pg_claimcheck.engine.wakeup)."""

    @property
    def scheduled(self) -> int:
        """Jobs due within the duration: i / rate < duration."""
        return max(1, math.ceil(self.rate_per_s * self.duration_s - 1e-9))

    @property
    def last_key(self) -> int:
        return self.first_key + self.scheduled - 1

    def jobs_of(self, producer: int) -> range:
        """The schedule's indices of one producer's jobs, in the order it enqueues them."""
        return range(producer, self.scheduled, self.producers)

    def index_of(self, job) -> int | None:
        """A produced job's place in the schedule, or None for a seeded job (or a learnt key, whose place
        only the producers' logs know)."""
        k = job - self.first_key if isinstance(job, int) and not self.learns_keys else -1
        return k if 0 <= k < self.scheduled else None

    def due_at(self, start: float, job) -> float | None:
        """A produced job's scheduled enqueue time (`start` is the schedule's), or None (see index_of)."""
        k = self.index_of(job)
        return None if k is None else start + k / self.rate_per_s

    def pause(self, start: float, i: int, now: float, stop) -> float | None:
        """Before job `i` at `now`: seconds to sleep and then ask again (at most STOP_POLL_S: a low --rate's
        wait is seconds, and the stop may come first), 0 to send it now, late or not, or None to send no
        more: the run is stopping, or the schedule's window (`--duration` + LAG_LIMIT_S) has closed, and
        what is not enqueued by then is reported as not enqueued."""
        if stop.value:
            return None
        due = start + i / self.rate_per_s
        if due > now:
            return min(due - now, STOP_POLL_S)
        return None if now >= start + self.duration_s + LAG_LIMIT_S else 0.0

    def histograms(self, start: float, log: WorkerLog) -> tuple[bytes, bytes] | None:
        """A worker's own (pickup, end-to-end) HDR histograms, encoded, at its end: every claim it made of a
        produced job, from the job's scheduled time to the claim's commit and to its finish (microseconds).
        None if the producer never started (`start` is NaN), or its keys are learnt: a worker cannot know a
        learnt key's due time, so the coordinator records those after the run (`outcome`)."""
        if math.isnan(start) or self.learns_keys:
            return None
        pickup, end_to_end = latencies(start, self.rate_per_s, log, self.index_of)
        return pickup.encode(), end_to_end.encode()


@dataclass
class ProducerLog:
    """What the producer did, sent to the coordinator when it ends."""

    started_at: float = math.nan
    committed_at: array = field(default_factory=lambda: array("d"))
    """Commit time of this producer's k-th job (ProducerPlan.jobs_of(producer)[k]); its due time is
    started_at + that index / rate."""
    error: str | None = None
    keys: list = field(default_factory=list)
    """Learnt keys only: the keys each of its enqueues returned (a tuple per enqueue, canonical form)."""

    @property
    def enqueued(self) -> int:
        return len(self.committed_at)


def enqueue(conn: psycopg.Connection, strategy: Strategy, key: int, learns: bool = False,
            key_is_int: bool = True, channel: str | None = None) -> tuple:
    """One enqueue in its own transaction: the file's `enqueue` section, or our jobs table's; the keys it created.
    On our jobs table the section must create the job with the reserved `key` and return it, one row; on a
    file's own tables (`learns`) it returns the keys it created, one row each, whatever they are."""
    if strategy.has("enqueue"):
        with conn.transaction():
            rows = execute_section(conn, strategy, "enqueue", {"key": key}).fetchall()
    else:  # one statement on an autocommit connection is its own transaction: one round trip, not three
        rows = conn.execute(QUERIES["enqueue_job_notify"], {"key": key, "channel": channel}, prepare=True).fetchall() \
            if channel else conn.execute(QUERIES["enqueue_job"], {"key": key}, prepare=True).fetchall()
    if learns:
        if not rows or any(not r or r[0] is None for r in rows):
            raise ValueError(f"section 'enqueue' returned {rows[:3]!r}; it must return the key of each job it "
                             "created, one row each (INSERT ... RETURNING id)")
        return tuple(canonical(r[0], key_is_int) for r in rows)
    if [tuple(r) for r in rows] != [(key,)]:
        raise ValueError(f"section 'enqueue' returned {rows[:3]!r} for key {key}; it must create the job with "
                         "key %(key)s and return that key, one row (INSERT ... RETURNING id)")
    return (key,)


def check_feedable(strategy: Strategy, settings: RunSettings) -> None:
    """What --rate can feed: our jobs table (a default enqueue, or the file's), or a file's own tables through
    its own `enqueue`, which returns the keys it created (learnt keys, pg_claimcheck.engine.fedkeys)."""
    if settings.rate_per_s is not None and strategy.own_schema and not strategy.has("enqueue"):
        raise UsageError(f"{strategy.source} brings its own tables: --rate needs its `enqueue` section, which "
                         "creates a job in them and returns its key (docs/contracts.md, section 1; "
                         "docs/producers.md)")


def producer_main(plan: ProducerPlan, index: int, barrier, shared, sender) -> None:
    """Producer `index`'s process: connect, wait at the barrier, enqueue its jobs on schedule until the duration ends."""
    children.child_process_setup()
    log = ProducerLog()
    try:
        try:
            conn = plan.run.connect("producer" if plan.producers == 1 else f"producer{index:02d}")
        except psycopg.Error as exc:
            log.error = f"the producer could not connect: {exc}"
            barrier.abort()
            return
        with conn:
            try:
                barrier.wait(BARRIER_TIMEOUT_S)
            except threading.BrokenBarrierError:
                return  # broken by a worker that could not start: its error is the run's, not ours
            start = log.started_at = _schedule_start(index, shared)
            clock, sleep, stop = time.monotonic, time.sleep, shared.stop
            for i in plan.jobs_of(index):
                while wait := plan.pause(start, i, clock(), stop):
                    sleep(wait)
                if wait is None:
                    break
                keys = enqueue(conn, plan.strategy, plan.first_key + i, plan.learns_keys, plan.key_is_int, plan.channel)
                log.committed_at.append(clock())
                if plan.learns_keys:
                    log.keys.append(keys)
    except Exception as exc:  # reported by the coordinator: the run is not judged without its producer
        log.error = f"the producer failed: {exc}"
    finally:
        # Only after its last commit: a worker that sees every flag 0 then finds the queue empty is drained.
        shared.producing.flags[index] = 0
        sender.send(("producer", log))
        sender.close()


def _schedule_start(index: int, shared) -> float:
    """The schedule's one start, on every producer: the first producer's release, written to shared memory
    before any job exists (the workers' latencies read it too); the others wait the moment it takes."""
    if index == 0:
        shared.feed_start.value = time.monotonic()
    while math.isnan(shared.feed_start.value):
        time.sleep(0.0005)
    return shared.feed_start.value


class ProducerProcess:
    """The coordinator's side of one producer: its process, the pipe its log comes back on.
    Started when made: make it inside interrupts.deferred() and keep it there, or a Ctrl-C mid-fork
    leaves it untracked (as the driver's workers)."""

    def __init__(self, ctx, plan: ProducerPlan, barrier, shared, index: int = 0) -> None:
        self.receiver, sender = ctx.Pipe(duplex=False)
        self.process = ctx.Process(target=producer_main, args=(plan, index, barrier, shared, sender),
                                   name=f"claimcheck-producer{index:02d}", daemon=True)
        self.index, self.shared, self.log = index, shared, ProducerLog()
        self.process.start()
        sender.close()

    def watch(self) -> None:
        """A producer dead before its `finally` never cleared its flag: clear it, so the workers may drain
        (its missing log is reported by receive)."""
        if self.shared.producing.flags[self.index] and not self.process.is_alive():
            self.shared.producing.flags[self.index] = 0

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


class Producers:
    """The coordinator's side of a run's producers, as one: started together (inside interrupts.deferred(),
    as ProducerProcess), watched, their logs received."""

    def __init__(self, ctx, plan: ProducerPlan, barrier, shared) -> None:
        self.each: list[ProducerProcess] = []
        for index in range(plan.producers):  # appended one by one: a Ctrl-C mid-way leaves none untracked
            self.each.append(ProducerProcess(ctx, plan, barrier, shared, index))

    @property
    def processes(self) -> list:
        return [p.process for p in self.each]

    @property
    def logs(self) -> list[ProducerLog]:
        return [p.log for p in self.each]

    @property
    def error(self) -> str | None:
        """The first producer's error (by index), or None."""
        return next((p.log.error for p in self.each if p.log.error), None)

    def watch(self) -> None:
        for p in self.each:
            p.watch()

    def receive(self, timeout_s: float) -> bool:
        """Every producer's log within `timeout_s` in all; False if one did not come."""
        deadline = time.monotonic() + timeout_s
        return all([p.receive(max(0.0, deadline - time.monotonic())) for p in self.each])

    @property
    def started_at(self) -> float:
        """The schedule's start (every producer's), NaN if none started."""
        return schedule_start([p.log for p in self.each])

    def close(self) -> None:
        for p in self.each:
            p.receiver.close()
