"""The worker loop: one process, one connection, claiming until the table is drained.

A worker records each committed claim locally (see :class:`harness.ledger.WorkerLog`) and sends
the whole log to the coordinator once, at the end: nothing on the hot path talks to anyone
but PostgreSQL. Serialization failures and deadlocks roll the transaction back, are counted,
and the statement is tried again.
"""
from __future__ import annotations

import ctypes
import random
import signal
import time
import traceback
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import errors, sql

from harness.fastpath import PreparedStatement
from harness.ledger import CLAIM_IS_COMPLETION, DONE, STALE, WorkerLog
from harness.queries import QUERIES
from harness.settings import RunSettings
from harness.strategy import Strategy, sample_params

BARRIER_TIMEOUT_S = 60.0
MAX_COMPLETION_RETRIES = 100
RETRY_BACKOFF_BASE_S = 0.0005
RETRY_BACKOFF_CAP_S = 0.05
_RETRYABLE = (errors.SerializationFailure, errors.DeadlockDetected)
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class WorkerPlan:
    """What every worker of a run shares."""

    dsn: str
    schema: str
    app_prefix: str
    """`application_name` is this plus the worker number: it names the run and the worker."""
    strategy: Strategy
    settings: RunSettings


def application_name(prefix: str, index: int) -> str:
    return f"{prefix}w{index:02d}"


def connect_worker(plan: WorkerPlan, index: int) -> psycopg.Connection:
    conn = psycopg.connect(plan.dsn, autocommit=True, application_name=application_name(plan.app_prefix, index))
    conn.prepare_threshold = 0  # server-side prepared statements from the first execution
    conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(plan.schema)))
    # The session default, so that single statements run in autocommit keep the strategy's level.
    conn.execute(sql.SQL("SET default_transaction_isolation TO {}").format(sql.Literal(plan.strategy.isolation)))
    return conn


def worker_main(plan: WorkerPlan, index: int, barrier: Any, stop: Any, progress: Any, pipe: Any) -> None:
    """Entry point of a worker process. Never raises: errors travel back in the log."""
    # Ctrl-C reaches the whole process group; the coordinator decides, and terminates us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # terminate() sends SIGTERM: die at once (the server rolls our transaction back). The CLI's
    # handler, inherited through fork, would turn it into a KeyboardInterrupt and a traceback.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    log = WorkerLog(worker=index)
    conn = None
    try:
        conn = connect_worker(plan, index)
        barrier.wait(BARRIER_TIMEOUT_S)
        log.started_at = time.monotonic()
        Loop(plan, index, conn, log, stop, progress).run()
    except Exception as exc:  # reported by the coordinator as an environment error
        log.error = f"worker {index}: {type(exc).__name__}: {str(exc).strip() or traceback.format_exc(limit=3)}"
        try:
            barrier.abort()
        except Exception:
            pass
    finally:
        log.finished_at = time.monotonic()
        try:
            pipe.send(log)
        finally:
            if conn is not None:
                conn.close()


class Loop:
    """The claim / work / complete cycle of one worker, in `lease` or `lock` mode."""

    def __init__(self, plan: WorkerPlan, index: int, conn: psycopg.Connection, log: WorkerLog,
                 stop: Any, progress: Any) -> None:
        self.conn, self.log, self.stop, self.progress, self.index = conn, log, stop, progress, index
        self.settings = plan.settings
        self.strategy = plan.strategy
        self.statements = plan.strategy.statements
        self.rng = random.Random(index)
        values = {"worker": f"w{index:02d}", "batch": self.settings.batch,
                  "lease_seconds": self.settings.lease_seconds}
        self.claim_params = sample_params(plan.strategy, "claim", ids=[], **values)
        self.pick_params = sample_params(plan.strategy, "pick", **values) if plan.strategy.has_pick else {}
        self.complete_uses = set(sample_params(plan.strategy, "complete", id=0, attempts=0, worker="")) \
            if plan.strategy.has_complete else set()
        self.worker_name = values["worker"]
        # Lease-mode completions, one autocommit statement per job, are the hot path: they go
        # through libpq directly (see harness.fastpath). Lock mode keeps psycopg's transaction.
        self.fast_complete = self._prepare_fast("complete") \
            if plan.strategy.has_complete and self.settings.mode == "lease" else None
        # One round trip for a lone claim statement in lease mode: autocommit makes it its own
        # transaction. A pick, or lock mode, needs an explicit transaction around several statements.
        self.explicit_transaction = plan.strategy.has_pick or self.settings.mode == "lock"
        self.fast_claim = None if self.explicit_transaction else self._prepare_fast("claim")
        self.fast_claim_params = self.fast_claim.bind(self.claim_params) if self.fast_claim else []
        self.claimed = 0
        self.consecutive_failures = 0

    def run(self) -> None:
        limit = self.settings.claims_per_worker
        while not self.stop.value:
            if limit is not None and self.log.claim_statements >= limit:
                return
            try:
                if self.claim_cycle():
                    self.consecutive_failures = 0
                    continue
                self.log.empty_claims += 1
                # The drain check runs at the strategy's isolation level too, so it can fail like a claim.
                if self.settings.drains and not self.conn.execute(QUERIES["queued_remaining"]).fetchone()[0]:
                    return
            except _RETRYABLE as exc:
                self._count_retry(exc)
                self._back_off()
                continue
            self.consecutive_failures = 0
            if self.settings.poll_ms:
                time.sleep(self.settings.poll_ms / 1000)

    def claim_cycle(self) -> int:
        """One claim transaction (and in lock mode the work and completions inside it)."""
        self.log.claim_statements += 1
        started = time.monotonic()
        if not self.explicit_transaction:
            rows = self._claim()
            committed = time.monotonic()
            self._after_lease_claim(rows, started, committed)
            return len(rows)
        with self.conn.transaction():
            rows = self._claim()
            claim_returned = time.monotonic()
            outcomes = [self._work_and_complete(job, attempt) for job, attempt in rows] \
                if self.settings.mode == "lock" else []
        committed = time.monotonic()
        if self.settings.mode == "lock":
            self._record_rows(rows, started, claim_returned)
            for (job, attempt), outcome in zip(rows, outcomes):
                self.log.record(job, attempt, committed, committed, outcome)
        else:
            self._after_lease_claim(rows, started, committed)
        return len(rows)

    def _prepare_fast(self, section: str) -> PreparedStatement | None:
        try:
            return PreparedStatement(self.conn, f"claimcheck_{section}", self.statements[section])
        except psycopg.Error:
            # The server could not infer a parameter's type without psycopg's hints (validation
            # passed with them): keep the general path for this strategy.
            return None

    def _claim(self) -> list[tuple[int, int]]:
        if self.fast_claim is not None:
            return self.fast_claim.id_attempt_rows(self.fast_claim_params)
        params = self.claim_params
        if self.strategy.has_pick:
            ids = [r[0] for r in self.conn.execute(self.statements["pick"], self.pick_params).fetchall()]
            if not ids:
                return []
            params = {**params, "ids": ids} if "ids" in params else params
        cur = self.conn.execute(self.statements["claim"], params)
        return [(r[0], r[1] if len(r) > 1 and r[1] is not None else 0) for r in cur.fetchall()]

    def _record_rows(self, rows: list, started: float, returned: float) -> None:
        if rows:
            self.log.claim_latency_ms.append((returned - started) * 1000)
            self.claimed += len(rows)
            self.progress[self.index] = self.claimed

    def _after_lease_claim(self, rows: list, started: float, committed: float) -> None:
        self._record_rows(rows, started, committed)
        if not self.strategy.has_complete:
            for job, attempt in rows:
                self.log.record(job, attempt, committed, committed, CLAIM_IS_COMPLETION)
            return
        recorded = [self.log.record(job, attempt, committed) for job, attempt in rows]
        for (job, attempt), slot in zip(rows, recorded):
            outcome = self._work_and_complete(job, attempt)
            self.log.end(slot, time.monotonic(), outcome)

    def _work_and_complete(self, job: int, attempt: int) -> int:
        pause = self.settings.work.draw_s(self.rng)
        if pause > 0:
            time.sleep(pause)
        if not self.strategy.has_complete:
            return CLAIM_IS_COMPLETION
        params = {k: v for k, v in (("id", job), ("attempts", attempt), ("worker", self.worker_name))
                  if k in self.complete_uses}
        if self.settings.mode == "lock":  # inside the claim's transaction: a failure retries the whole cycle
            return DONE if self.conn.execute(self.statements["complete"], params).rowcount > 0 else STALE
        for _ in range(MAX_COMPLETION_RETRIES):
            try:
                changed = self.fast_complete.rowcount(params) if self.fast_complete else \
                    self.conn.execute(self.statements["complete"], params).rowcount
                self.consecutive_failures = 0
                return DONE if changed > 0 else STALE
            except _RETRYABLE as exc:
                self._count_retry(exc)
                self._back_off()
        raise RuntimeError(f"completion of job {job} failed {MAX_COMPLETION_RETRIES} times in a row")

    def _back_off(self) -> None:
        """Sleep a random, growing pause before a retry: retrying at once under SERIALIZABLE
        meets the same concurrent claims again and can fail indefinitely."""
        self.consecutive_failures += 1
        ceiling = min(RETRY_BACKOFF_CAP_S, RETRY_BACKOFF_BASE_S * 2 ** self.consecutive_failures)
        time.sleep(self.rng.uniform(0, ceiling))

    def _count_retry(self, exc: Exception) -> None:
        if isinstance(exc, errors.SerializationFailure):
            self.log.serialization_failures += 1
        else:
            self.log.deadlocks += 1
