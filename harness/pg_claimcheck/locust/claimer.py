"""One Locust user = one claimer: the fork driver's worker loop on a gevent greenlet.

Each user opens its own connection and runs :class:`pg_claimcheck.engine.worker.Loop` (the same claim
cycles of pg_claimcheck.engine.cycle, lease and lock modes, the same SQL-file contract) until the
table is drained or the run's limit is reached. What differs is only the backend and the plumbing:

- :class:`LocustBackend` is psycopg's general path (pg_claimcheck.engine.backend.PsycopgBackend):
  psycopg (3.1.14+) sees that gevent has patched `select` and waits for the server through it, so
  a user blocked on PostgreSQL yields to the others (test_psycopg_yields_to_other_greenlets_under_gevent,
  in tests/acceptance/test_locust_engine.py, checks that it really does). The libpq fast path (pg_claimcheck.engine.fastpath) would block the whole process.
- Records travel to the master with Locust's own messaging (`runner.send_message`), through the
  same :class:`pg_claimcheck.engine.logstream.LogStream` the fork driver's workers write to their pipe.
- Times are on the server's clock: each user reads `clock_timestamp()` when it connects, and again
  every ANCHOR_EVERY_S, and sends its `time.monotonic()` readings shifted by the offset, so the
  master compares claims from different hosts without their clocks having to agree (the error is
  half the anchoring round trip plus the drift of one host's clock over ANCHOR_EVERY_S).
- Each claim statement is a Locust request (`claim`, or `claim: empty` when it returned no job),
  and each completion one (`complete` / `fail`): claims/s and latency percentiles in Locust's UI
  and CSV files.
"""
from __future__ import annotations

import itertools
import json
import math
import time
from dataclasses import asdict
from typing import Any

import psycopg

from pg_claimcheck.contract.keys import KeySpace
from pg_claimcheck.contract.queries import QUERIES
from pg_claimcheck.contract.strategy import ClaimShape, Strategy
from pg_claimcheck.engine.backend import PsycopgBackend
from pg_claimcheck.engine.logstream import LogDelta, LogStream
from pg_claimcheck.engine.shared import Shared
from pg_claimcheck.engine.worker import Loop, WorkerPlan, connect_when_up, connect_worker, send_end, worker_role
from pg_claimcheck.server.runcontext import RunContext
from pg_claimcheck.settings import FaultPlan, RunSettings, WorkTime
from pg_claimcheck.verdict.ledger import WorkerLog
from pg_claimcheck.verdict.observed import WorkerTelemetry

LOG_MESSAGE = "claimcheck_log"
"""A user's records since its last flush (a LogStream delta), times on the server's clock."""
START_MESSAGE = "claimcheck_start"
"""A user connected and is about to claim: the master waits for its end (or its process's death)."""
END_MESSAGE = "claimcheck_end"
"""A user finished: its summary (LogStream's), after its last delta."""
INDEX_STRIDE = 100_000
"""A user's number is its Locust worker process's index times this, plus its number in the process:
unique across hosts, so `%(worker)s` (written to locked_by) names one claimer."""
ANCHOR_EVERY_S = 5.0
_numbers = itertools.count()


class LocustSettings(RunSettings):
    """RunSettings for Locust users: the fork driver's cap on processes does not apply."""

    max_workers = 1_000_000


def encode_plan(plan: WorkerPlan) -> str:
    """The plan as the master forwards it to workers (a custom option, sent with Locust's spawn)."""
    settings = asdict(plan.settings)
    settings["work"] = asdict(plan.settings.work)
    # The seeded keys travel with the plan (a uuid is 36 bytes: 20,000 jobs are under 1 MB); the
    # fork driver's workers inherit them instead.
    keys = None if plan.keys is None else asdict(plan.keys)
    return json.dumps({"dsn": plan.run.dsn, "run_id": plan.run.run_id, "strategy": asdict(plan.strategy),
                       "settings": settings, "shape": asdict(plan.shape), "keys": keys})


def decode_plan(text: str) -> WorkerPlan:
    data = json.loads(text)
    settings = data["settings"]
    settings["work"] = WorkTime(**settings["work"])
    settings["faults"] = FaultPlan(**settings["faults"]) if settings.get("faults") else None
    shape = {k: tuple(v) if isinstance(v, list) else v for k, v in data["shape"].items()}
    return WorkerPlan(run=RunContext(data["dsn"], data["run_id"]), shape=ClaimShape(**shape),
                      keys=None if data["keys"] is None else KeySpace(**data["keys"]),
                      strategy=Strategy(**data["strategy"]), settings=LocustSettings(**settings))


class ServerClock:
    """This host's monotonic clock, shifted onto the server's `clock_timestamp()` (epoch seconds)."""

    def __init__(self) -> None:
        self.offset = math.nan
        self.anchored_at = -math.inf

    def anchor(self, conn: psycopg.Connection) -> None:
        before = time.monotonic()
        server = conn.execute(QUERIES["server_clock"]).fetchone()[0]
        after = time.monotonic()
        self.offset, self.anchored_at = server - (before + after) / 2, after

    def due(self) -> bool:
        return time.monotonic() - self.anchored_at >= ANCHOR_EVERY_S

    def server_time(self, t: float) -> float:
        return t + self.offset  # NaN (a claim not ended yet) stays NaN


class ToMaster:
    """Where a user's LogStream sends (a pg_claimcheck.engine.logstream.RecordSink): Locust's messages to
    the master, times shifted onto the server's clock."""

    def __init__(self, runner: Any, index: int, clock: ServerClock) -> None:
        self.runner, self.index, self.clock = runner, index, clock
        self.loop: "Loop | None" = None

    def _anchor_if_due(self) -> None:
        if self.loop is not None and self.clock.due():
            try:  # between transactions: flushes never happen inside one
                self.clock.anchor(self.loop.conn)
            except psycopg.Error:
                pass  # the connection is gone; the loop reconnects (and anchors) on its next statement

    def send_delta(self, delta: LogDelta) -> None:
        self._anchor_if_due()
        self.runner.send_message(LOG_MESSAGE, {"user": self.index,
                                               "delta": delta.shifted(self.clock.offset).to_wire()})

    def send_end(self, summary: dict) -> None:
        self._anchor_if_due()
        at = self.clock.server_time
        fields = dict(summary, claim_latency_ms=list(summary["claim_latency_ms"]))
        fields["started_at"] = at(fields["started_at"]) if fields["started_at"] else 0.0
        fields["finished_at"] = at(fields["finished_at"])
        self.runner.send_message(END_MESSAGE, {"user": self.index, "summary": fields})


class LocustBackend(PsycopgBackend):
    """psycopg's general path (its waits yield to the process's other greenlets; libpq's blocking calls
    of the fast path would stall them all), with each claim and each completion a Locust request, and
    the server clock anchored again on every new connection."""

    def __init__(self, *args: Any, events: Any, clock: ServerClock, **kwargs: Any) -> None:
        self.events, self.clock = events, clock
        super().__init__(*args, **kwargs)

    def reconnect(self) -> None:
        super().reconnect()
        self.clock.anchor(self.conn)

    def _fire(self, name: str, started: float, length: int, exception: Exception | None = None) -> None:
        self.events.request.fire(request_type="SQL", name=name, response_time=(time.perf_counter() - started) * 1000,
                                 response_length=length, exception=exception, context={})

    def claim(self) -> list[tuple]:
        started = time.perf_counter()
        try:
            rows = super().claim()
        except Exception as exc:
            self._fire("claim", started, 0, exc)
            raise
        self._fire("claim" if rows else "claim: empty", started, len(rows))
        return rows

    def change(self, section: str, job: int, attempt: int) -> bool:
        if section not in ("complete", "fail"):
            return super().change(section, job, attempt)
        started = time.perf_counter()
        try:
            changed = super().change(section, job, attempt)
        except Exception as exc:
            self._fire(section, started, 0, exc)
            raise
        self._fire(section, started, int(changed))
        return changed


def run_claimer(environment: Any, plan: WorkerPlan) -> None:
    """The body of one Locust user: connect, claim until done, send the summary. Never raises but
    GreenletExit (Locust stopping the user): errors travel to the master in the summary."""
    runner = environment.runner
    index = max(getattr(runner, "worker_index", 0), 0) * INDEX_STRIDE + next(_numbers)
    log, telemetry, clock = WorkerLog(worker=index), WorkerTelemetry(worker=index), ServerClock()
    pipe = ToMaster(runner, index, clock)
    stream = LogStream(pipe, log, plan.flush_interval_s)
    shared = Shared.local()
    loop = None
    try:
        conn = connect_worker(plan, index)
        clock.anchor(conn)
        telemetry.started_at = time.monotonic()
        runner.send_message(START_MESSAGE, {"user": index, "started_at": clock.server_time(telemetry.started_at)})
        backend = LocustBackend(plan, worker_role(index), conn, log.unknown_keys,
                                connect=lambda: connect_when_up(plan, index, shared),
                                events=environment.events, clock=clock)
        loop = Loop(plan, index, backend, log, telemetry, shared, stream)
        pipe.loop = loop
        if plan.settings.duration_s is not None:
            import gevent  # only ever imported under Locust

            gevent.spawn_later(plan.settings.duration_s, setattr, shared.stop, "value", 1)
        loop.run()
    except Exception as exc:
        telemetry.error = f"user {index}: {type(exc).__name__}: {str(exc).strip()}"
    finally:
        send_end(telemetry, stream, loop)
