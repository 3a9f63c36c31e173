"""An in-memory job queue behind the claim cycles' backend protocol (pg_claimcheck.engine.backend), as
procrastinate's `InMemoryConnector` stands behind its worker: the cycles' rules (the order of commit,
records and flushes, retries, reconnects, rollbacks) are tested against it without a server.

The queue is a dict of jobs, each queued, running or done, with its attempts and last error; a claim
takes the lowest queued ids, a completion is fenced by the attempt, as our jobs table's statements
are. Everything the backend does, and every message the worker's stream sends, goes to one `trace`,
in order. Errors are scripted per operation (`fail_next`): a server error (an exception with a
SQLSTATE), or a lost connection, before the statement runs or after it committed. Transactions are
real to the queue: a ROLLBACK restores what the transaction changed.
"""
from __future__ import annotations

import copy
import dataclasses
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import SimpleNamespace

import psycopg

from pg_claimcheck.contract.strategy import load_strategy
from pg_claimcheck.engine.backend import INJECTED_ERROR, complete_one_by_one
from pg_claimcheck.engine.logstream import LogStream
from pg_claimcheck.engine.shared import Shared
from pg_claimcheck.engine.worker import Loop, WorkerPlan
from pg_claimcheck.server.runcontext import RunContext
from pg_claimcheck.settings import RunSettings
from pg_claimcheck.verdict.ledger import WorkerLog
from pg_claimcheck.verdict.observed import WorkerTelemetry

LOST = "lost"
"""A scripted error that drops the connection before the statement reaches the server."""
LOST_AFTER_COMMIT = "lost after commit"
"""A scripted error that drops the connection after the statement committed (its answer is lost)."""
MAX_ATTEMPTS = 3
"""A job failed this many times is failed for good, as the seed's `fail` does at max_attempts."""


@dataclass
class Job:
    status: str = "queued"
    attempts: int = 0
    last_error: str | None = None


@dataclass
class MemoryQueue:
    """The jobs, shared by every backend on it (as a table is by connections)."""

    jobs: dict[int, Job] = field(default_factory=dict)

    @classmethod
    def seeded(cls, count: int) -> "MemoryQueue":
        return cls({job: Job() for job in range(1, count + 1)})


class MemoryBackend:
    """The backend protocol over a MemoryQueue."""

    backend_pid = None

    def __init__(self, queue: MemoryQueue, batch: int, trace: list | None = None, lifecycle: bool = False) -> None:
        self.queue, self.batch, self.lifecycle = queue, batch, lifecycle
        """`lifecycle`: jobs can come back, and a running job is not finished (our drain queries)."""
        self.trace = trace if trace is not None else []
        self.fail_next: dict[str, list] = {}
        """Operation (`claim`, `complete`, `fail`, `extend`, `after_commit`, `commit`) -> what its next
        calls raise, in turn: an exception, LOST or LOST_AFTER_COMMIT."""
        self.connected = True
        self.in_transaction = False
        self.connections = 1
        self.sent_at: dict[tuple[str, int, int], float] = {}
        self.conn = SimpleNamespace(closed=False)

    def _scripted(self, operation: str, statement) -> object:
        """Run `statement` (a callable), or what the script says happens instead."""
        if not self.connected:
            raise psycopg.OperationalError("the connection is closed")
        script = self.fail_next.get(operation)
        what = script.pop(0) if script else None
        if what == LOST:
            self.connected = False
            self.trace.append(("lost", operation))
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        if isinstance(what, Exception):
            self.trace.append(("error", operation, what.sqlstate))
            raise what
        result = statement()
        if what == LOST_AFTER_COMMIT:
            self.connected = False
            self.trace.append(("lost", operation))
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return result

    def claim(self) -> list[tuple]:
        def take() -> list[tuple]:
            queued = sorted(job for job, row in self.queue.jobs.items() if row.status == "queued")[:self.batch]
            for job in queued:
                row = self.queue.jobs[job]
                row.status, row.attempts = "running", row.attempts + 1
            rows = [(job, self.queue.jobs[job].attempts) for job in queued]
            self.trace.append(("claim", [job for job, _ in rows]))
            return rows
        return self._scripted("claim", take)

    def complete_each(self, jobs, claimed, plain, clock=None):
        return complete_one_by_one(self.change, jobs, clock)

    def change(self, section: str, job: int, attempt: int) -> bool:
        self.sent_at.setdefault((section, job, attempt), time.monotonic())  # when it was first sent

        def run() -> bool:
            row = self.queue.jobs[job]
            owned = row.status == "running" and row.attempts == attempt
            if section == "complete" and owned:
                row.status = "done"
            elif section == "fail" and owned:  # requeued, or failed for good at MAX_ATTEMPTS
                row.status = "failed" if row.attempts >= MAX_ATTEMPTS else "queued"
                row.last_error = INJECTED_ERROR
            self.trace.append((section, job, owned))
            return owned
        return self._scripted(section, run)

    @contextmanager
    def transaction(self):
        if not self.connected:
            raise psycopg.OperationalError("the connection is closed")
        saved = copy.deepcopy(self.queue.jobs)
        self.trace.append(("begin",))
        self.in_transaction = True
        try:
            yield self
            self._scripted("commit", lambda: None)  # a COMMIT that fails rolls back too
        except BaseException:
            self.queue.jobs = saved
            self.trace.append(("rollback",))
            raise
        finally:
            self.in_transaction = False
        self.trace.append(("commit",))

    def lost(self, exc: psycopg.Error) -> bool:
        return not self.connected

    def reconnect(self) -> None:
        self.connected, self.connections = True, self.connections + 1
        self.trace.append(("reconnect",))

    def remaining(self) -> int:
        unfinished = ("queued", "running") if self.lifecycle else ("queued",)
        return sum(row.status in unfinished for row in self.queue.jobs.values())

    def server_now(self) -> float:
        return time.time()

    def job_state(self, job: int) -> tuple | None:
        row = self.queue.jobs.get(job)
        self.trace.append(("job_state", job))
        return None if row is None else (row.status, row.attempts, row.last_error)

    def close(self) -> None:
        self.conn.closed = True


class TraceSink:
    """Where the worker's stream sends (a pg_claimcheck.engine.logstream.RecordSink): each delta goes to
    the trace as ("send", the jobs it carries), the summary as ("send", "end")."""

    def __init__(self, trace: list) -> None:
        self.trace = trace

    def send_delta(self, delta) -> None:
        self.trace.append(("send", list(delta.job)))

    def send_end(self, summary: dict) -> None:
        self.trace.append(("send", "end"))


def memory_loop(jobs: int = 10, *, strategy: str = "skip-locked", statements: dict | None = None,
                **settings) -> tuple[Loop, MemoryBackend, WorkerLog, list]:
    """A worker's Loop on a fresh in-memory queue of `jobs` jobs: (loop, backend, log, trace); its
    telemetry is `loop.telemetry`.
    `settings` are RunSettings' (workers=1, zero work time unless given); `statements` replace the
    strategy's sections (only which sections exist matters here)."""
    loaded = load_strategy(strategy)
    if statements is not None:
        loaded = dataclasses.replace(loaded, statements=statements)
    run = RunSettings(**{"workers": 1, "jobs": jobs, "poll_ms": 0.0, **settings})
    plan = WorkerPlan(run=RunContext("postgresql://memory", "memory"), strategy=loaded, settings=run)
    trace: list = []
    backend = MemoryBackend(MemoryQueue.seeded(jobs), run.batch, trace, run.lifecycle)
    log = WorkerLog(worker=0)
    stream = LogStream(TraceSink(trace), log, plan.flush_interval_s)
    return Loop(plan, 0, backend, log, WorkerTelemetry(worker=0), Shared.local(), stream), backend, log, trace
