"""The lock-wait sampler: what this run's backends wait on, read from `pg_stat_activity`.

A thread with its own connection takes one sample every SAMPLE_INTERVAL_S: the wait event of
each busy backend of the run, and how many of them wait on a lock at once. One cheap catalog
query twenty times a second is noise next to thousands of claims per second.

When no job progresses, :func:`stuck_backends` asks once which worker is stuck in one statement (a
`pg_sleep`, a lock never released, a `complete` that never returns), so a run that ends for want of
progress says which worker held it up, its backend and what it waits on.
"""
from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field

import psycopg

from claimcheck.contract.queries import QUERIES
from claimcheck.server.runcontext import RunContext

SAMPLE_INTERVAL_S = 0.05


@dataclass
class WaitSamples:
    """What the sampler saw."""

    samples: int = 0
    events: Counter = field(default_factory=Counter)
    """`"Type/Event"` -> number of (sample, backend) pairs seen waiting on it."""
    max_waiting_workers: int = 0
    """The most backends waiting on a heavyweight lock (`Lock/*`) in one sample."""
    error: str | None = None

    def add(self, waits: list[tuple]) -> None:
        """One sample: rows of sample_activity, (wait_event_type, wait_event)."""
        self.samples += 1
        on_lock = 0
        for wait_type, wait_event in waits:
            if wait_type:
                self.events[f"{wait_type}/{wait_event}"] += 1
                on_lock += wait_type == "Lock"
        self.max_waiting_workers = max(self.max_waiting_workers, on_lock)


class LockWaitSampler:
    """Samples in a background thread between `start()` and `stop()`."""

    def __init__(self, run: RunContext) -> None:
        self.run = run
        self.params = {"app_prefix": run.app_pattern()}
        self.result = WaitSamples()
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._run, name="claimcheck-sampler", daemon=True)
        self._conn: psycopg.Connection | None = None

    def _connect(self) -> psycopg.Connection:
        conn = self.run.connect("sampler", in_schema=False)
        conn.prepare_threshold = 0
        return conn

    def start(self) -> None:
        self._conn = self._connect()
        self._thread.start()

    def _run(self) -> None:
        while not self._halt.wait(SAMPLE_INTERVAL_S):
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = self._connect()
                self.result.add(self._conn.execute(QUERIES["sample_activity"], self.params).fetchall())
            except psycopg.OperationalError as exc:  # a server restart: sample again once it is back
                self.result.error = str(exc).strip()
                if self._conn is not None:
                    self._conn.close()
                self._conn = None

    def stop(self) -> WaitSamples:
        self._halt.set()
        if self._thread.is_alive():
            self._thread.join()
        if self._conn is not None:
            self._conn.close()
        return self.result


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
