"""Seed 003's serverless activity monitor, pointed at one run: a sample of the run's own sessions every half
second (`Sampler`), and a simulated suspend (`suspend`), which closes a design's sessions as a suspend closes every
connection and watches what the design does next. What the samples mean is pg_claimcheck.verdict.activity's.

The sampler reads pg_stat_activity for the run's own sessions only (its application_name prefix, the sampler's
own session and claimcheck's coordinator left out), the autovacuum workers on the run's own tables (its schema
in their query, or its own database) and a count of the server's replication connections.
"""
from __future__ import annotations

import time
from contextlib import ExitStack
from datetime import datetime
from typing import Callable

from pg_claimcheck.contract.queries import QUERIES
from pg_claimcheck.server.runcontext import RunContext
from pg_claimcheck.verdict.activity import SAMPLE_INTERVAL_S, Resume, Sample, Session

SAMPLER_ROLE = "idle-sampler"
PRODUCER_ROLE = "idle-producer"
"""The connection that sends a job after a simulated suspend: claimcheck's, not the design's."""
RESUME_WATCH_S = 10.0
"""After a simulated suspend: how long to watch for the design's reconnect and its taking of the job sent."""


class Sampler:
    """The monitor's look at the run's sessions, on a connection of its own (left out of what it reads)."""

    def __init__(self, run: RunContext, stack: ExitStack, *, database: str | None = None,
                 left_out: tuple[str, ...] = ()) -> None:
        self.conn = stack.enter_context(run.connect(SAMPLER_ROLE, in_schema=database is None))
        self.prefix = run.app_prefix
        self.params = {"pattern": run.app_pattern(), "database": database, "schema_dot": f"{run.schema}."}
        self.left_out = {run.app_name(r) for r in (SAMPLER_ROLE, "coordinator", "cleanup", PRODUCER_ROLE, *left_out)}

    def take(self) -> Sample:
        rows = self.conn.execute(QUERIES["idle_sample"], self.params).fetchall()
        sessions, autovacuum, replication = [], [], 0
        for at, kind, pid, app, state, changed, started, query in rows:
            if kind == "session" and app not in self.left_out:
                sessions.append(Session(pid, app[len(self.prefix):], state, _epoch(changed or started),
                                        _epoch(started), query or ""))
            elif kind == "autovacuum":
                autovacuum.append(query)
            elif kind == "replication":
                replication += 1
        return Sample(_epoch(rows[0][0]), tuple(sessions), tuple(autovacuum), replication)

    def now(self) -> float:
        return _epoch(self.conn.execute("SELECT clock_timestamp()").fetchone()[0])

    def sample_for(self, seconds: float, samples: list[Sample], until=None) -> None:
        """Append a sample every SAMPLE_INTERVAL_S for `seconds` (or until `until(samples)` holds)."""
        started = time.monotonic()
        tick = 0
        while True:
            samples.append(self.take())
            if until is not None and until(samples):
                return
            tick += 1
            due = started + tick * SAMPLE_INTERVAL_S
            if due - started > seconds + 1e-9:
                return
            time.sleep(max(due - time.monotonic(), 0.0))


def _epoch(ts: datetime | None) -> float:
    return ts.timestamp() if ts is not None else 0.0


def suspend(sampler: Sampler, run: RunContext, roles: list[str], samples: list[Sample],
            send: Callable[[], float] | None = None, taken: Callable[[], tuple[float, str] | None] | None = None,
            gone: Callable[[], bool] = lambda: False) -> Resume:
    """Close the design's sessions (`roles`) as a suspend would; watch for its reconnect and, with `send` (which
    enqueues one job with its notification and returns time.monotonic() at its commit), for `taken()` to say
    when and how the design took it. `gone()`: the design's process has exited (a library's worker that died
    of the closed connection)."""
    closed_at = sampler.now()
    closed = {pid for pid, _ in sampler.conn.execute(
        QUERIES["idle_suspend"], {**sampler.params, "names": [run.app_name(r) for r in roles]}).fetchall()}
    sent_at = send() if send is not None else None
    before = len(samples)

    def settled(seen: list[Sample]) -> bool:
        back = any(s.pid not in closed for s in seen[-1].sessions)
        return gone() or (back and (sent_at is None or taken() is not None))

    sampler.sample_for(RESUME_WATCH_S, samples, until=settled)
    back = [s.backend_start for sample in samples[before:] for s in sample.sessions if s.pid not in closed]
    took = taken() if sent_at is not None else None
    return Resume(reconnected_after_s=(min(back) - closed_at) if back else None,
                  watched_s=samples[-1].at - closed_at,
                  job_claimed_after_s=(took[0] - sent_at) if took else None,
                  found_by=took[1] if took else None, exited=gone(), job_sent=sent_at is not None)
