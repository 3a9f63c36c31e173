"""The worker loop: one process, one connection, claiming until the table is drained.

The loop runs its mode's claim cycle (pg_claimcheck.engine.cycle) over a backend (pg_claimcheck.engine.backend:
the libpq fast path here, psycopg's general path under Locust) and handles what ends a cycle: an
empty claim (the drain check), a server error, a lost connection, the run's stop and claim limit.
A worker records each committed claim locally (see :class:`pg_claimcheck.verdict.ledger.WorkerLog`) and
streams its records to the coordinator over a one-way pipe (see :mod:`pg_claimcheck.engine.logstream`):
every FLUSH_INTERVAL_S (PROOF_FLUSH_INTERVAL_S in a run that stops at a proven violation), and
under fault injection right after each claim and each ending.
Nothing on the hot path waits for anyone but PostgreSQL, and a killed worker loses at most what
it did between a commit and the flush. A server error raised inside a claim (serialization failure,
deadlock, NOWAIT's lock_not_available, a unique violation, anything the user's SQL raises) rolls
the transaction back, is counted by SQLSTATE, and the claim is tried again after a random pause on
the same connection: reconnecting would drop the session's advisory locks and change what is
tested. Only a lost connection (terminated backend, server restart) is re-established, and counted.
"""
from __future__ import annotations

import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from pg_claimcheck.contract.keys import KeySpace
from pg_claimcheck.contract.limit import ClaimLimit, claim_limit
from pg_claimcheck.contract.strategy import DEFAULT_SHAPE, ClaimShape, Strategy
from pg_claimcheck.engine import wakeup
from pg_claimcheck.engine.backend import Backend, Stopping
from pg_claimcheck.engine.cycle import cycle_for
from pg_claimcheck.engine.fastpath import LibpqBackend
from pg_claimcheck.engine.logstream import FLUSH_INTERVAL_S, PROOF_FLUSH_INTERVAL_S, LogStream, PipeSink, summary
from pg_claimcheck.engine.shared import Shared
from pg_claimcheck.errors import ClaimcheckError
from pg_claimcheck.server.children import child_process_setup
from pg_claimcheck.server.runcontext import RunContext, StatelessConnection, when_up
from pg_claimcheck.settings import RunSettings
from pg_claimcheck.verdict.ledger import WorkerLog
from pg_claimcheck.verdict.observed import WorkerTelemetry

BARRIER_TIMEOUT_S = 60.0
RECONNECT_TIMEOUT_S = 60.0
RECONNECT_PAUSE_S = 0.1


@dataclass(frozen=True)
class WorkerPlan:
    """What every worker of a run shares."""

    run: RunContext
    """Names every worker's connection `claimcheck/<run id>/wNN`, in the run's schema."""
    strategy: Strategy
    settings: RunSettings
    shape: ClaimShape = DEFAULT_SHAPE
    """What the claim returns (learnt by validation)."""
    keys: KeySpace | None = None
    """The seeded keys (inherited through fork, never sent); None: integer keys used as they are."""
    feed: Any = None
    """A rate run's pg_claimcheck.engine.producer.ProducerPlan: the worker records its produced jobs' latencies."""

    @property
    def releases(self) -> bool:
        """Can a claim be released before it finishes (failures, the reaper, faults, or a lease the
        claim returns)? Then a re-claim may be a redelivery, judged only once every release is known."""
        return self.settings.lifecycle or self.shape.lease_index is not None

    @property
    def limit(self) -> ClaimLimit:
        """The most rows one claim asks for: `--batch`, or the LIMIT written in its text (see
        pg_claimcheck.contract.limit); an over-claim is judged against it."""
        return claim_limit(self.strategy.statements, self.settings.batch)

    @property
    def stops_on_proof(self) -> bool:
        """Does the run end at the first violation its records prove (`check`, see pg_claimcheck.engine.watch)?
        Only where nothing can release a claim."""
        return self.settings.stop_early and not self.releases

    @property
    def flush_interval_s(self) -> float:
        """How often a claimer sends its records when no fault can kill it (see pg_claimcheck.engine.logstream)."""
        return PROOF_FLUSH_INTERVAL_S if self.stops_on_proof else FLUSH_INTERVAL_S



def worker_role(index: int) -> str:
    return f"w{index:02d}"


def connect_worker(plan: WorkerPlan, index: int) -> psycopg.Connection:
    conn = plan.run.connect(worker_role(index), worker=True, isolation=plan.strategy.isolation)
    if isinstance(conn, StatelessConnection):
        # Through a pooler each transaction sets its own isolation and settings; nothing is prepared by name.
        conn.settings = plan.strategy.session
        return conn
    conn.prepare_threshold = 0  # server-side prepared statements from the first execution
    # The session default, so that single statements run in autocommit keep the strategy's level.
    conn.execute(sql.SQL("SET default_transaction_isolation TO {}").format(sql.Literal(plan.strategy.isolation)))
    for name, value in plan.strategy.session:  # a condition's settings, for the whole session
        conn.execute(sql.SQL("SET {} = {}").format(sql.Identifier(*name.split(".")), sql.Literal(value)))
    return conn


def connect_when_up(plan: WorkerPlan, index: int, shared: Shared) -> psycopg.Connection:
    """`connect_worker` during a run: retried while the server cannot take connections (a restart
    fault under way), for up to RECONNECT_TIMEOUT_S; `Stopping` if the run ends meanwhile."""
    def stopping() -> None:
        if shared.stop.value:
            raise Stopping from None

    return when_up(lambda: connect_worker(plan, index), RECONNECT_TIMEOUT_S, pause_s=RECONNECT_PAUSE_S,
                   give_up=stopping)


def worker_main(plan: WorkerPlan, index: int, barrier: Any, shared: Shared, pipe: Any) -> None:
    """Entry point of a worker process. Never raises: errors travel back in the final message."""
    child_process_setup()
    log, telemetry = WorkerLog(worker=index), WorkerTelemetry(worker=index)
    stream = LogStream(PipeSink(pipe), log, plan.flush_interval_s)
    loop = None
    released = False
    try:
        if barrier is None:
            # A replacement for a killed worker joins a run under way, maybe while a restart fault has
            # the server down.
            conn = connect_when_up(plan, index, shared)
        else:  # the run's first workers fail fast: a bad DSN is an error before the start
            conn = connect_worker(plan, index)
            barrier.wait(BARRIER_TIMEOUT_S)
        released = True
        telemetry.started_at = time.monotonic()
        cpu_started = time.process_time()
        backend = LibpqBackend(plan, worker_role(index), conn, log.unknown_keys,
                               connect=lambda: connect_when_up(plan, index, shared))
        loop = Loop(plan, index, backend, log, telemetry, shared, stream)
        try:
            loop.run()
        finally:
            telemetry.cpu_s = time.process_time() - cpu_started
    except Stopping:  # a replacement still waiting for the server when the run ended: nothing to record
        pass
    except threading.BrokenBarrierError:
        # Another worker failed before the start and broke the barrier (its error says why), or the
        # coordinator gave up waiting: nothing of ours to report, or ours would hide the cause.
        pass
    except Exception as exc:  # reported by the coordinator as an environment error
        # One of ours says what and where (a section that fails at run time); anything else, its type too.
        kind = "" if isinstance(exc, ClaimcheckError) else f"{type(exc).__name__}: "
        telemetry.error = f"worker {index}: {kind}{str(exc).strip() or traceback.format_exc(limit=3)}"
        # Before the start, the others must not wait for us. After it, an abort would break the
        # barrier under workers not yet awake from it, and hide our error behind theirs.
        if barrier is not None and not released:
            try:
                barrier.abort()
            except Exception:
                pass
    finally:
        if plan.feed is not None:
            telemetry.latency_histograms = plan.feed.histograms(shared.feed_start.value, log)
        send_end(telemetry, stream, loop)


def send_end(telemetry: WorkerTelemetry, stream: LogStream, loop: "Loop | None") -> None:
    """A claimer's last word, however it ended: what it had not sent yet of its log, its telemetry, its
    connection closed (the fork driver's workers and Locust users alike)."""
    telemetry.finished_at = time.monotonic()
    try:
        stream.flush()
        stream.sink.send_end(summary(telemetry))
    finally:
        if loop is not None:
            loop.backend.close()


class Loop:
    """One worker's claims until the table is drained, the run stops, or it made its claims: its mode's
    cycle, and what ends a cycle (an empty claim, an error, a lost connection)."""

    def __init__(self, plan: WorkerPlan, index: int, backend: Backend, log: WorkerLog, telemetry: WorkerTelemetry,
                 shared: Shared, stream: LogStream) -> None:
        self.plan, self.backend, self.log, self.shared, self.stream = plan, backend, log, shared, stream
        self.telemetry = telemetry
        self.settings = plan.settings
        self.cycle = cycle_for(plan, index, backend, log, telemetry, shared, stream)
        self.idle = wakeup.waiter(plan.settings, plan.feed.channel if plan.feed is not None else None)
        """The wait after an empty claim: a poll pause, or a LISTEN (--wakeup)."""
        telemetry.wakeups = self.idle.counts

    @property
    def conn(self) -> psycopg.Connection:
        """The backend's connection now (a reconnect replaces it)."""
        return self.backend.conn

    def run(self) -> None:
        try:
            self._run()
        except Stopping:  # told to stop while the server was away: nothing more to record
            return

    def _run(self) -> None:
        limit, cycle = self.settings.claims_per_worker, self.cycle
        while not self.shared.stop.value:
            if limit is not None and self.telemetry.claim_statements >= limit:
                return
            try:
                if cycle.claims():
                    continue  # the run is stopping, or this worker reached its claims
                self.telemetry.empty_claims += 1
                # The drain check runs at the strategy's isolation level too, so it can fail like a claim.
                # A run with a time or claim limit ends at the drain too: nothing is left to measure.
                # Read before the drain check: 0 means the producer's last commit came before it.
                producing = self.shared.producing is not None and self.shared.producing.value
                if not self.backend.remaining() and not producing:
                    self.telemetry.drained = True
                    return
            except psycopg.Error as exc:
                if self.backend.lost(exc):
                    cycle.reconnect(exc)
                elif exc.sqlstate is None:
                    raise  # not the server's answer (a client-side error): a harness or file problem
                else:  # a claim outcome: counted, retried on the same connection after a pause
                    cycle.count_retry(exc)
                    cycle.back_off()
                continue
            cycle.consecutive_failures = 0
            self.stream.flush_if_due()
            self.idle.wait(self.conn)  # an empty claim: poll, or wait for a notification (pg_claimcheck.engine.wakeup)
