"""`claimcheck idle`: a worker design against an empty queue, sampled as a serverless compute's monitor samples.

A design is how a worker waits when the queue is empty (seed 003's three options):
- `poll`: claim, sleep the interval, claim again (always-on polling);
- `notify`: LISTEN on the run's channel and claim when notified, or after the interval (the fallback
  poll), with pg_claimcheck.engine.wakeup's Listen, the wait `check --wakeup notify` runs;
- `drain`: a scheduled drain: connect, claim until the queue is empty, disconnect; again after the interval.
Each design's connections are named for it (`claimcheck/<run>/poll-worker`, ...), and the sampler reads
pg_stat_activity every half second for the run's own sessions only (pg_claimcheck.verdict.activity turns that
into the monitor's verdict). When a design would let the compute suspend while it holds sessions, the
suspend is simulated: its sessions are terminated, as a suspend closes every connection, and the probe
watches for a reconnect (which would resume the compute) and, under notify, sends one job with its
notification to see that it is not lost.
"""
from __future__ import annotations

import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass

import psycopg

from pg_claimcheck.contract.queries import QUERIES
from pg_claimcheck.contract.strategy import Strategy
from pg_claimcheck.engine.monitor import PRODUCER_ROLE, Sampler, suspend
from pg_claimcheck.engine.wakeup import Listen, channel_name
from pg_claimcheck.probes import PROBE_QUERIES
from pg_claimcheck.probes._work import claim, complete
from pg_claimcheck.server.runcontext import RunContext
from pg_claimcheck.server.schema import key_base
from pg_claimcheck.verdict.activity import SAMPLE_INTERVAL_S, Footprint, Sample, footprint

WAKEUPS = ("poll", "notify", "drain")
ROLES = {"poll": "poll-worker", "notify": "listen-worker", "drain": "drain-worker"}
CLAIM_ROLES = {"poll-worker": "claim poll", "listen-worker": "LISTEN fallback poll", "drain-worker": "scheduled drain"}
"""The cause of a claim by the role of the connection that ran it (pg_claimcheck.verdict.activity.cause_of)."""
RECONNECT_PAUSE_S = 0.1
"""A worker that lost its connection reconnects after this pause (as the engine's workers do: at once)."""
JOIN_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Design:
    wakeup: str
    interval_ms: int
    """poll: the sleep after an empty claim; notify: the fallback poll; drain: the schedule."""

    @property
    def role(self) -> str:
        return ROLES[self.wakeup]

    @property
    def interval_s(self) -> float:
        return self.interval_ms / 1000

    @property
    def label(self) -> str:
        every = _seconds(self.interval_s)
        return {"poll": f"poll every {every}", "notify": f"LISTEN, poll {every}",
                "drain": f"drain every {every}"}[self.wakeup]


def _seconds(s: float) -> str:
    return f"{s / 60:g} min" if s >= 120 and s % 60 == 0 else f"{s:g}s"


class Worker(threading.Thread):
    """One worker of a design, on its own thread, against the run's empty queue."""

    def __init__(self, run: RunContext, strategy: Strategy, design: Design) -> None:
        super().__init__(daemon=True, name=design.role)
        self.run_ctx, self.strategy, self.design = run, strategy, design
        self.stop = threading.Event()
        self.claimed: list[tuple[int, float, str]] = []
        """(job id, time.monotonic() of the claim, how the wait before it ended)."""
        self.error: BaseException | None = None
        self.ready = threading.Event()
        """Set when its start-up is over: its first drain ended, or it is about to wait on its LISTEN or poll."""
        self.listen = Listen(channel_name(run.run_id), design.interval_s) if design.wakeup == "notify" else None

    def run(self) -> None:
        try:
            if self.design.wakeup == "drain":
                self._drains()
            else:
                self._wait_loop()
        except BaseException as exc:  # shown by the probe, which stops
            self.error = exc

    def _take(self, conn: psycopg.Connection, woken_by: str) -> bool:
        jobs = claim(conn, self.strategy, self.design.role)
        if jobs:
            self.claimed.extend((j.id, time.monotonic(), woken_by) for j in jobs)
            complete(conn, self.strategy, self.design.role, jobs)
        return bool(jobs)

    def _drains(self) -> None:
        while not self.stop.is_set():
            with self.run_ctx.connect(self.design.role, worker=True) as conn:
                while self._take(conn, "schedule") and not self.stop.is_set():
                    pass
            self.ready.set()
            self.stop.wait(self.design.interval_s)

    def _wait_loop(self) -> None:
        conn, woken_by = None, "start"
        try:
            while not self.stop.is_set():
                try:
                    if conn is None or conn.closed:
                        conn = self.run_ctx.connect(self.design.role, worker=True)
                    if self._take(conn, woken_by):
                        continue
                    if self.listen is None or self.listen.listening_on is conn:
                        self.ready.set()
                    if self.listen is None:
                        self.stop.wait(self.design.interval_s)
                        woken_by = "poll"
                    else:
                        before = dict(self.listen.counts)
                        self.listen.wait(conn)
                        woken_by = next((k for k, v in self.listen.counts.items() if v != before[k]), "notified")
                except psycopg.OperationalError:  # a suspend (or its simulation) closed the connection
                    if conn is not None:
                        conn.close()
                    conn = None
                    self.stop.wait(RECONNECT_PAUSE_S)
        finally:
            if conn is not None:
                conn.close()

    def halt(self, run: RunContext) -> None:
        """Stop: a listening worker is woken by a notification on its channel, a sleeping one by the event."""
        self.stop.set()
        if self.listen is not None and self.is_alive():
            try:
                with run.connect(PRODUCER_ROLE, in_schema=False) as conn:
                    conn.execute(PROBE_QUERIES["notify"], {"channel": self.listen.channel, "payload": "stop"})
            except psycopg.Error:
                pass
        self.join(JOIN_TIMEOUT_S)


def _send_notified_job(run: RunContext) -> float:
    """One job and its notification in one transaction (the default enqueue of `--wakeup notify`)."""
    with run.connect(PRODUCER_ROLE) as producer:
        producer.execute(QUERIES["enqueue_job_notify"], {"key": key_base(run.run_id) + 1,
                                                         "channel": channel_name(run.run_id)})
        return time.monotonic()


def run_design(run: RunContext, strategy: Strategy, design: Design, window_s: float,
               thresholds: list[float]) -> Footprint:
    """One design on the run's empty queue for `window_s`, sampled; then, if it would let the compute
    suspend while holding sessions, the suspend simulated."""
    with ExitStack() as stack:
        sampler = Sampler(run, stack)
        worker = Worker(run, strategy, design)
        samples: list[Sample] = []
        try:
            worker.start()
            # The window opens once the design's start-up (its connection, LISTEN, first claim) is behind it.
            while not worker.ready.wait(SAMPLE_INTERVAL_S):
                if not worker.is_alive():
                    break
            samples = [sampler.take()]
            window_start = samples[0].at
            sampler.sample_for(window_s, samples)
            fp = footprint(design.label, samples, window_start, thresholds, interval_s=design.interval_s,
                           claim_roles=CLAIM_ROLES)
            if fp.verdicts[0].would_suspend and samples[-1].sessions:
                send = (lambda: _send_notified_job(run)) if design.wakeup == "notify" else None
                resume = suspend(sampler, run, [design.role], samples[:], send,
                                 lambda: worker.claimed[0][1:] if worker.claimed else None)
                fp = footprint(design.label, samples, window_start, thresholds, interval_s=design.interval_s,
                               resume=resume, claim_roles=CLAIM_ROLES)
        finally:
            worker.halt(run)
        if worker.error is not None:
            raise worker.error
        return fp
