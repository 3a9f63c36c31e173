"""The samplers: what this run's backends wait on (`pg_stat_activity`), and, in a rate run, how deep
the queue is and what the table bloats to over time.

Each is a thread with its own connection (:class:`Sampling`: one sample per interval, a new
connection after a server restart). The lock-wait sampler takes one sample every SAMPLE_INTERVAL_S:
the wait event of each busy backend of the run, and how many of them wait on a lock at once. One
cheap catalog query twenty times a second is noise next to thousands of claims per second. The
queue sampler (:class:`QueueSampler`, `check --rate`, docs/producers.md) takes one every
:func:`queue_interval_s`: jobs queued and running, dead tuples and the table's size, read from the
table and `pg_stat_user_tables`, and one last sample once the workers have drained.

When no job progresses, :func:`stuck_backends` asks once which worker is stuck in one statement (a
`pg_sleep`, a lock never released, a `complete` that never returns), so a run that ends for want of
progress says which worker held it up, its backend and what it waits on.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import psycopg

from pg_claimcheck.contract.queries import QUERIES
from pg_claimcheck.server.runcontext import RunContext
from pg_claimcheck.verdict.observed import SAMPLE_INTERVAL_S, QueueSamples, WaitSamples

QUEUE_SAMPLES = 200
"""Queue samples a rate run's --duration is cut into (its drain adds some): enough to chart, small in the JSON."""
QUEUE_INTERVAL_S = (0.1, 5.0)
"""The queue sampler's interval, seconds, at least and at most. Each sample scans the table (the ready index is
partial, and a fed table's statistics are too stale for the planner to use it): 180,000 rows took 40-80 ms on
PostgreSQL 15 here at a load of 19 on 2 cores, so a 600 s run is sampled every 3 s, not every second."""


class Sampling:
    """A thread with its own connection that calls :meth:`sample` every `interval_s` between `start()` and
    `stop()`; after a lost connection (a server restart) it connects again and samples on. A subclass
    samples into its `result` (with an `error` field), which `stop()` returns."""

    role = "sampler"
    in_schema = False

    def __init__(self, run: RunContext, interval_s: float) -> None:
        self.run, self.interval_s = run, interval_s
        self.error: str | None = None
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"claimcheck-{self.role}", daemon=True)
        self._conn: psycopg.Connection | None = None

    def sample(self, conn: psycopg.Connection) -> None:
        raise NotImplementedError

    def _connect(self) -> psycopg.Connection:
        conn = self.run.connect(self.role, in_schema=self.in_schema)
        conn.prepare_threshold = 0
        return conn

    def start(self) -> None:
        self._conn = self._connect()
        self._thread.start()

    def _sample_once(self) -> None:
        try:
            if self._conn is None or self._conn.closed:
                self._conn = self._connect()
            self.sample(self._conn)
        except psycopg.OperationalError as exc:  # a server restart: sample again once it is back
            self.error = str(exc).strip()
            if self._conn is not None:
                self._conn.close()
            self._conn = None

    def _run(self) -> None:
        while not self._halt.wait(self.interval_s):
            self._sample_once()

    def stop(self, last: bool = False):
        """End the thread; with `last`, take one more sample first (the state the run ended in). The
        samples taken, with the last connection error met (None: none)."""
        self._halt.set()
        if self._thread.is_alive():
            self._thread.join()
        if last:
            self._sample_once()
        if self._conn is not None:
            self._conn.close()
        self.result.error = self.error
        return self.result


class LockWaitSampler(Sampling):
    """Samples lock waits in a background thread between `start()` and `stop()`."""

    def __init__(self, run: RunContext) -> None:
        super().__init__(run, SAMPLE_INTERVAL_S)
        self.params = {"app_prefix": run.app_pattern()}
        self.result = WaitSamples()

    def sample(self, conn: psycopg.Connection) -> None:
        self.result.add(conn.execute(QUERIES["sample_activity"], self.params).fetchall())


def queue_interval_s(duration_s: float) -> float:
    """The queue sampler's interval for a producer's --duration: QUEUE_SAMPLES over it, within QUEUE_INTERVAL_S."""
    low, high = QUEUE_INTERVAL_S
    return min(high, max(low, duration_s / QUEUE_SAMPLES))


class QueueSampler(Sampling):
    """Samples claimcheck's jobs table (in the run's schema) while a producer feeds it (see the module docstring)."""

    role = "queue-sampler"
    in_schema = True

    def __init__(self, run: RunContext, interval_s: float) -> None:
        super().__init__(run, interval_s)
        self.result = QueueSamples(interval_s=interval_s)

    def sample(self, conn: psycopg.Connection) -> None:
        row = conn.execute(QUERIES["sample_queue"]).fetchone()
        self.result.at.append(time.monotonic())
        self.result.rows.append(tuple(row))


class RunSamplers:
    """A fork run's samplers, started and stopped together: lock waits always, and in a rate run (`feed_s`, the
    producer's --duration) the queue too. Its `queue` holds the queue's samples once stopped (None without)."""

    def __init__(self, run: RunContext, feed_s: float | None = None) -> None:
        self.waits = LockWaitSampler(run)
        self._queue = None if feed_s is None else QueueSampler(run, queue_interval_s(feed_s))
        self.queue: QueueSamples | None = None

    def start(self) -> None:
        self.waits.start()
        if self._queue is not None:
            self._queue.start()

    def stop(self, last: bool = False) -> WaitSamples:
        """The lock waits seen; with `last` (the run ended as it should), one more sample of the queue first."""
        if self._queue is not None:
            self.queue = self._queue.stop(last)
        return self.waits.stop()


@dataclass(frozen=True)
class StuckBackend:
    """A worker's backend that has been in one state (a statement, or a transaction left open) for long."""

    worker: str
    pid: int
    state: str
    wait: str | None
    for_s: float
    query: str

    def __str__(self) -> str:
        wait = f"wait event {self.wait}" if self.wait else "no wait event (running)"
        return (f"worker {self.worker} (backend pid {self.pid}) has been {self.state} for {self.for_s:.0f}s, "
                f"{wait}: {' '.join(self.query.split())[:60]}")


def stuck_backends(conn: psycopg.Connection, run: RunContext, at_least_s: float) -> list[StuckBackend]:
    """The run's worker backends in one state for at least `at_least_s`, longest first."""
    rows = conn.execute(QUERIES["stuck_worker_backends"],
                        {"app_prefix": run.app_pattern(), "at_least_s": at_least_s}).fetchall()
    return [StuckBackend(worker=app.rsplit("/", 1)[-1], pid=pid, state=state or "?",
                         wait=f"{wait_type}/{wait_event}" if wait_type else None, for_s=for_s, query=query or "")
            for app, pid, state, wait_type, wait_event, for_s, query in rows]
