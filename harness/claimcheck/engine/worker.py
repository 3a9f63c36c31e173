"""The worker loop: one process, one connection, claiming until the table is drained.

A worker records each committed claim locally (see :class:`claimcheck.verdict.ledger.WorkerLog`) and
streams its records to the coordinator over a one-way pipe (see :mod:`claimcheck.engine.logstream`):
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

import random
import threading
import time
import traceback
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import errors, pq, sql

from claimcheck.contract.dialect import placeholders
from claimcheck.engine import idle
from claimcheck.engine.fastpath import InlineStatement, PreparedStatement, Transaction
from claimcheck.server.interrupts import child_process_setup
from claimcheck.contract.claimrows import ClaimRows, Notes
from claimcheck.contract.limit import ClaimLimit, claim_limit
from claimcheck.contract.keys import KeySpace
from claimcheck.verdict.ledger import ABANDONED, CLAIM_IS_COMPLETION, DONE, FAILED, STALE, WorkerLog
from claimcheck.engine.logstream import FLUSH_INTERVAL_S, PROOF_FLUSH_INTERVAL_S, LogStream, PipeSink, summary
from claimcheck.engine.shared import Shared
from claimcheck.contract.queries import QUERIES
from claimcheck.server.runcontext import RunContext, StatelessConnection
from claimcheck.settings import RunSettings
from claimcheck.contract.strategy import DEFAULT_SHAPE, RUN_SECTIONS, ClaimShape, Strategy, execute_section, pick_params

BARRIER_TIMEOUT_S = 60.0
MAX_COMPLETION_RETRIES = 100
RETRY_BACKOFF_BASE_S = 0.0005
RETRY_BACKOFF_CAP_S = 0.05
RECONNECT_TIMEOUT_S = 60.0
RECONNECT_PAUSE_S = 0.1
MAX_CONSECUTIVE_ERRORS = 1000
"""A claim that fails this many times in a row on one worker (each retried after a pause) is not
contention but a broken statement: the worker gives up and the run is not judged."""
INJECTED_ERROR = "claimcheck: injected failure"
_LOST_SQLSTATES = ("57P01", "57P02", "57P03")  # admin / crash shutdown, cannot connect now


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
    """A rate run's claimcheck.engine.producer.ProducerPlan: the worker records its produced jobs' latencies."""

    @property
    def releases(self) -> bool:
        """Can a claim be released before it finishes (failures, the reaper, faults, or a lease the
        claim returns)? Then a re-claim may be a redelivery, judged only once every release is known."""
        return self.settings.lifecycle or self.shape.lease_index is not None

    @property
    def limit(self) -> ClaimLimit:
        """The most rows one claim asks for: `--batch`, or the LIMIT written in its text (see
        claimcheck.contract.limit); an over-claim is judged against it."""
        return claim_limit(self.strategy.statements, self.settings.batch)

    @property
    def stops_on_proof(self) -> bool:
        """Does the run end at the first violation its records prove (`check`, see claimcheck.engine.watch)?
        Only where nothing can release a claim."""
        return self.settings.stop_early and not self.releases

    @property
    def flush_interval_s(self) -> float:
        """How often a claimer sends its records when no fault can kill it (see claimcheck.engine.logstream)."""
        return PROOF_FLUSH_INTERVAL_S if self.stops_on_proof else FLUSH_INTERVAL_S



def worker_role(index: int) -> str:
    return f"w{index:02d}"


def connect_worker(plan: WorkerPlan, index: int) -> psycopg.Connection:
    conn = plan.run.connect(worker_role(index), worker=True, isolation=plan.strategy.isolation)
    if isinstance(conn, StatelessConnection):
        return conn  # through a pooler: each transaction sets its own isolation; nothing is prepared by name
    conn.prepare_threshold = 0  # server-side prepared statements from the first execution
    # The session default, so that single statements run in autocommit keep the strategy's level.
    conn.execute(sql.SQL("SET default_transaction_isolation TO {}").format(sql.Literal(plan.strategy.isolation)))
    return conn


def connect_when_up(plan: WorkerPlan, index: int, shared: Shared) -> psycopg.Connection:
    """`connect_worker` during a run: retried while the server cannot take connections (a restart
    fault under way), for up to RECONNECT_TIMEOUT_S; `_Stopping` if the run ends meanwhile."""
    deadline = time.monotonic() + RECONNECT_TIMEOUT_S
    while True:
        try:
            return connect_worker(plan, index)
        except psycopg.OperationalError:
            if shared.stop.value:
                raise _Stopping from None
            if time.monotonic() > deadline:
                raise
            time.sleep(RECONNECT_PAUSE_S)


def worker_main(plan: WorkerPlan, index: int, barrier: Any, shared: Shared, pipe: Any) -> None:
    """Entry point of a worker process. Never raises: errors travel back in the final message."""
    child_process_setup()
    log = WorkerLog(worker=index)
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
        log.started_at = time.monotonic()
        cpu_started = time.process_time()
        loop = Loop(plan, index, conn, log, shared, stream)
        try:
            loop.run()
        finally:
            log.cpu_s = time.process_time() - cpu_started
    except _Stopping:  # a replacement still waiting for the server when the run ended: nothing to record
        pass
    except threading.BrokenBarrierError:
        # Another worker failed before the start and broke the barrier (its error says why), or the
        # coordinator gave up waiting: nothing of ours to report, or ours would hide the cause.
        pass
    except Exception as exc:  # reported by the coordinator as an environment error
        log.error = f"worker {index}: {type(exc).__name__}: {str(exc).strip() or traceback.format_exc(limit=3)}"
        # Before the start, the others must not wait for us. After it, an abort would break the
        # barrier under workers not yet awake from it, and hide our error behind theirs.
        if barrier is not None and not released:
            try:
                barrier.abort()
            except Exception:
                pass
    finally:
        if plan.feed is not None:
            log.latency_histograms = plan.feed.histograms(shared.feed_start.value, log)
        send_end(log, stream, loop)


def send_end(log: WorkerLog, stream: LogStream, loop: "Loop | None") -> None:
    """A claimer's last word, however it ended: what it had not sent yet, its summary, its
    connection closed (the fork driver's workers and Locust users alike)."""
    log.finished_at = time.monotonic()
    try:
        stream.flush()
        stream.sink.send_end(summary(log))
    finally:
        if loop is not None and not loop.conn.closed:
            loop.conn.close()


JOB_COLUMNS = {"id": 0, "attempts": 1}
"""The per-job parameters, by their place in a (key, attempt) pair."""


class _Stopping(Exception):
    """The run is stopping while this worker has no connection."""


class Loop:
    """The claim / work / complete cycle of one worker, in `lease` or `lock` mode."""

    def __init__(self, plan: WorkerPlan, index: int, conn: psycopg.Connection, log: WorkerLog,
                 shared: Shared, stream: LogStream) -> None:
        self.plan, self.conn, self.log, self.shared, self.stream, self.index = plan, conn, log, shared, stream, index
        self.settings = s = plan.settings
        self.strategy = plan.strategy
        self.statements = plan.strategy.statements
        self.rng = random.Random(index)
        self.worker_name = worker_role(index)
        values = {"worker": self.worker_name, "batch": s.batch, "lease_seconds": s.lease_seconds, "ids": [],
                  "error": INJECTED_ERROR, "backoff_unit_s": s.backoff_unit_s, "backoff_cap_s": s.backoff_cap_s}
        values.update(id=0, attempts=0)
        # The fixed parameters of each section; the claim's pick columns are added per claim.
        self.params = {section: {k: values[k] for k in placeholders(plan.strategy.statements[section]) if k in values}
                       for section in plan.strategy.statements if section in RUN_SECTIONS}
        # One round trip for a lone claim statement in lease mode: autocommit makes it its own
        # transaction. A pick, or lock mode, needs an explicit transaction around several statements.
        self.shape = plan.shape
        self.keys = plan.keys
        self.explicit_transaction = (plan.strategy.has_pick or s.mode == "lock"
                                     or len(plan.strategy.steps("claim")) > 1)
        self.drain_query = QUERIES["unfinished_remaining" if s.lifecycle else "queued_remaining"]
        """Our jobs table's drain check; a file with its own tables has its `remaining` section."""
        self.no_work = s.work.kind == "fixed" and s.work.a_ms == 0
        """Zero work time (a parity run): nothing to draw or sleep per job."""
        self.numbered_keys = plan.keys is None or plan.keys.keys is None
        """Keys are the ledger's numbers themselves (our jobs table, or a contiguous integer range)."""
        self.unlocks = plan.strategy.has("after_commit")
        self.consecutive_failures = 0
        self._released_at = 0.0
        """When the last `fail` (a requeue) was first sent: see _finish_resiliently."""
        self.reader = ClaimRows(plan.shape, plan.keys, plan.limit.rows)
        self.pending_leases: list[tuple[float, float]] = []
        self.claim_backend: int | None = None
        self.pooled = False
        self.idle = idle.waiter(s, plan.feed.channel if plan.feed is not None else None)
        """The wait after an empty claim: a poll pause, or a LISTEN (--wakeup)."""
        log.wakeups = self.idle.counts
        self._prepare_fast_paths()

    def _prepare_fast_paths(self) -> None:
        """A lone claim statement and its per-job completions are the hot path, in both modes: they go
        through libpq directly (see claimcheck.engine.fastpath), prepared again on every new connection.
        In lock mode the transaction around them does too (see `_transaction`). A pick, a claim of
        several statements, or one returning a lease keeps psycopg's general path."""
        self.pooled = isinstance(self.conn, StatelessConnection)
        """Through a pooler (decided once per connection): the backend of each claim is recorded."""
        self.transaction = Transaction(self.conn)  # one per connection; through a pooler, each BEGIN sets the isolation
        single = lambda section: self.strategy.has(section) and len(self.strategy.steps(section)) == 1  # noqa: E731
        self.fast_complete = self._prepare_fast("complete") if single("complete") else None
        self.bind_complete = self.fast_complete.binder(self.params["complete"], JOB_COLUMNS, 2) \
            if self.fast_complete else None
        """Binds (key, attempt) pairs of values: the numbers read, or the keys they stand for."""
        # A claim returning its lease reads the server's clock right after it: the general path.
        plain = self.shape.lease_index is None and not self.strategy.has_pick
        self.fast_claim = self._prepare_fast("claim") if plain and single("claim") else None
        self.fast_claim_params = self.fast_claim.bind(self.params["claim"]) if self.fast_claim else []
        # A fast claim's rows are libpq's text. Where they are integer keys numbering the jobs themselves
        # and integer attempts, each completion takes them from the claim's row as they came.
        echo = self.fast_complete and self.fast_claim and self.reader.plain and self.shape.attempt_is_int
        self.bind_claimed = self.fast_complete.binder(
            self.params["complete"], {**JOB_COLUMNS, "attempts": self.shape.attempt_index}, len(self.shape.columns)
        ) if echo else None
        """Binds a claim read by the plain reading (its notes say so); else `bind_complete` binds the
        numbers read (a NULL attempt is bound as 0, as the ledger reads it)."""
        s = self.settings
        self.plain_jobs = (self.fast_complete is not None and self.no_work and not self.unlocks and s.faults is None
                           and self.shape.lease_index is None and not (s.fail_rate and self.strategy.has("fail")))
        """Nothing happens per job but its completion through the fast path (no work time, no failure to
        decide, no fault, no unlock, no lease to note): `_plain_cycles` runs the claims, and `_complete`
        is not called (a loop that hooks it, Locust's, prepares no fast path)."""

    def _transaction(self) -> AbstractContextManager:
        """An explicit transaction (the claim's, or a per-job section of several statements) through
        libpq: the BEGIN, COMMIT or ROLLBACK of psycopg's `conn.transaction()`, without its
        DEALLOCATE ALL on a rollback, which would drop the fast path's statements. psycopg's own
        prepared statements outlive the ROLLBACK as well (they are not transactional)."""
        return self.transaction

    def _prepare_fast(self, section: str) -> PreparedStatement | None:
        """The section's statement prepared on libpq's fast path, or None for psycopg's general path.
        Through a pooler nothing is prepared by name: the statement is sent whole each time, its
        parameters inline (see claimcheck.engine.fastpath.InlineStatement)."""
        if self.pooled:
            return InlineStatement(self.conn, self.statements[section])
        try:
            return PreparedStatement(self.conn, f"claimcheck_{section}", self.statements[section])
        except psycopg.Error:
            # The server could not infer a parameter's type without psycopg's hints (validation
            # passed with them): keep the general path for this strategy.
            return None

    def _lost(self, exc: psycopg.Error) -> bool:
        """Is this the connection going away (terminated backend, restarting server)? Not every
        OperationalError is: NOWAIT's 55P03 is one, raised by a healthy connection. The fast path
        reports a dead connection without an SQLSTATE, so ask libpq too."""
        if self.conn.closed or self.conn.pgconn.status == pq.ConnStatus.BAD:
            return True
        state = exc.sqlstate
        if state is None:
            return isinstance(exc, psycopg.OperationalError)
        return state.startswith("08") or state in _LOST_SQLSTATES

    def run(self) -> None:
        try:
            self._run()
        except _Stopping:  # told to stop while the server was away: nothing more to record
            return

    def _run(self) -> None:
        limit = self.settings.claims_per_worker
        while not self.shared.stop.value:
            if limit is not None and self.log.claim_statements >= limit:
                return
            try:
                if self.claim_cycle():
                    self.consecutive_failures = 0
                    continue
                self.log.empty_claims += 1
                # The drain check runs at the strategy's isolation level too, so it can fail like a claim.
                # A run with a time or claim limit ends at the drain too: nothing is left to measure.
                # Read before the drain check: 0 means the producer's last commit came before it.
                producing = self.shared.producing is not None and self.shared.producing.value
                if not self._remaining() and not producing:
                    self.log.drained = True
                    return
            except psycopg.Error as exc:
                if self._lost(exc):
                    self._reconnect()
                elif exc.sqlstate is None:
                    raise  # not the server's answer (a client-side error): a harness or file problem
                else:  # a claim outcome: counted, retried on the same connection after a pause
                    self._count_retry(exc)
                    self._back_off()
                continue
            self.consecutive_failures = 0
            self.stream.flush_if_due()
            self.idle.wait(self.conn)  # an empty claim: poll, or wait for a notification (claimcheck.engine.idle)

    def _remaining(self) -> int:
        """How many jobs are left (a file's `remaining` section may hold several statements)."""
        if self.strategy.has("remaining"):
            return execute_section(self.conn, self.strategy, "remaining", {}).fetchone()[0]
        return self.conn.execute(self.drain_query).fetchone()[0]

    def claim_cycle(self) -> int:
        """One claim transaction (and in lock mode the work and completions inside it); with
        `plain_jobs`, as many as follow each other without a pause (see `_plain_cycles`)."""
        if self.plain_jobs:
            return self._plain_cycles()
        self.log.claim_statements += 1
        started = time.monotonic()
        if not self.explicit_transaction:
            rows, notes = self._record_shape(self._claim(), started)
            self._keep_notes(notes)
            self._after_lease_claim(rows, started, time.monotonic())
            return len(rows)
        with self._transaction():
            rows, notes = self._record_shape(self._claim(), started)
            claim_returned = time.monotonic()
            outcomes = self._finish_all_in_transaction(rows) if self.settings.mode == "lock" else []
            commit_sent = time.monotonic()
        committed = time.monotonic()
        self._keep_notes(notes)  # only now: a rolled-back claim is no claim, and proves nothing
        if self.settings.mode == "lock":
            first = len(self.log)  # the claim's first slot: its rows are recorded in order
            for (job, attempt), outcome in zip(rows, outcomes):
                # A requeue is timed when its COMMIT was sent: no later claim can have seen it sooner
                # (see _finish_resiliently). A claim is timed once its commit returned.
                released = commit_sent if outcome == FAILED else committed
                self._note_lease(self.log.record(job, attempt, committed, released, outcome))
            if self.pooled:  # once per claim, not per job
                self._note_backend(first, len(rows))
            self._count_claimed(rows, started, claim_returned)
            self._after_commit(rows)
            self._flush(bool(rows))  # as in lease mode: at once under faults, else at the plan's flush interval
        else:
            self._after_lease_claim(rows, started, committed)
        return len(rows)

    def _plain_cycles(self) -> int:
        """`claim_cycle` for `plain_jobs`, again and again while claims return jobs and the run goes on:
        the same statements, transactions and records, in one Python frame. Returns the last claim's
        row count (0: empty, for `_run` to handle; else the run is stopping or reached its claims).

        Why one frame: with 16 workers and their backends on 2 cores, a worker is switched out at
        every round trip and resumes on a cold cache, where each Python call costs far more than its
        instructions. In paired runs of the parity cell (PostgreSQL 15, lease mode, 16 workers), this
        loop used about 12 us less of the workers' CPU per job than the same cycle as separate methods
        (claim_cycle, _after_lease_claim, the per-job finish) while the machine was slow, and the same
        while it was fast: it matters when caches are cold.

        Lease mode: the claim commits on its own (or in its transaction, for a pick or a claim of several
        statements), then each job is completed in its own transaction; a completion that raises hands
        its job and the rest to `_finish_each`, which retries. Lock mode: claim and completions in one
        transaction, recorded once it committed; an error rolls it all back and reaches `_run`."""
        log, shared, stream = self.log, self.shared, self.stream
        clock, limit, lock = time.monotonic, self.settings.claims_per_worker, self.settings.mode == "lock"
        while True:
            log.claim_statements += 1
            started = clock()
            if self.explicit_transaction:
                with self._transaction():
                    claimed = self._claim()
                    rows, notes = self._record_shape(claimed, started)
                    returned = clock()
                    if lock:
                        bound = self._bound_completions(rows, claimed, notes)
                        counts, _, error = self.fast_complete.rowcount_each(bound)
                        if error is not None:
                            raise error
                committed = clock()
                if not lock:  # a lease claim is timed once its commit returned, as without a transaction
                    returned = committed
            else:
                claimed = self._claim()
                rows, notes = self._record_shape(claimed, started)
                committed = returned = clock()
            self._keep_notes(notes)  # after the commit: a rolled-back claim is no claim, and proves nothing
            if not rows:
                return 0
            if lock:  # no requeue, no lease: every job ended when the commit returned
                first = log.record_claims(rows, committed, committed, [DONE if n else STALE for n in counts])
            else:
                first = log.record_claims(rows, committed)
            if self.pooled:
                self._note_backend(first, len(rows))
            self._count_claimed(rows, started, returned)
            if not lock:
                # self.fast_complete, not a local: `_finish_each` may have reconnected (a new connection,
                # new prepared statements) after the previous claim.
                bound = self._bound_completions(rows, claimed, notes)
                counts, ended, error = self.fast_complete.rowcount_each(bound, clock)
                log.end_all(first, ended, [DONE if n else STALE for n in counts])
                if error is not None:
                    done = len(counts)
                    self._finish_each(rows[done:], first + done, error)
            # The claims reach the coordinator with their endings, at the next flush that is due (no
            # fault can kill this worker in between).
            stream.flush_if_due()
            self.consecutive_failures = 0
            if shared.stop.value or (limit is not None and log.claim_statements >= limit) or not self.plain_jobs:
                return len(rows)  # (a reconnect whose fast path could not be prepared ends plain_jobs)

    def _claim(self) -> list[tuple]:
        """The claim's rows, as tuples of the values of its columns."""
        if self.fast_claim is not None:
            return self.fast_claim.rows(self.fast_claim_params)
        params = self.params["claim"]
        if self.strategy.has_pick:
            picked = execute_section(self.conn, self.strategy, "pick", self.params["pick"]).fetchall()
            if not picked:
                return []
            params = {**params, **pick_params(self.shape.pick_columns, picked)}
        return execute_section(self.conn, self.strategy, "claim", params).fetchall()

    def _record_shape(self, rows: list[tuple], started: float) -> tuple[list[tuple[int, int]], Notes]:
        """(job number, attempt) per row (see claimcheck.contract.claimrows); the notes wait for the commit."""
        jobs, notes = self.reader.read(rows, started)
        if self.pooled:  # the backend that ran the claim (its connection records it per statement)
            self.claim_backend = self.conn.backend_pid
        self.pending_leases = []
        if notes.leases:
            # The server's clock right after the claim: a re-take is judged against the earlier
            # holder's lease_until with the server's time, never the client's.
            server_now = self.conn.execute(QUERIES["server_clock"]).fetchone()[0]
            self.pending_leases = [(server_now, until) for until in notes.leases]
        return jobs, notes

    def _keep_notes(self, notes: Notes) -> None:
        """The claim committed: what its rows showed becomes part of the log."""
        self.log.unknown_keys.update(notes.unknown_keys)
        self.log.over_attempts.extend(notes.over_attempts)
        self.log.over_claims.extend(notes.over_claims)

    def _note_lease(self, slot: int) -> None:
        """Attach the lease of the claim recorded at `slot` (rows are recorded in claim order)."""
        if self.pending_leases:
            server_now, until = self.pending_leases.pop(0)
            self.log.leases.append((slot, server_now, until))

    def _after_commit(self, rows: list[tuple[int, int]]) -> None:
        """The file's `after_commit` (the unlock of a session advisory lock), per job, on this
        connection, once the transaction that ended the job's ownership has committed."""
        if not self.unlocks:
            return
        for job, attempt in rows:
            try:
                execute_section(self.conn, self.strategy, "after_commit",
                                self._job_params("after_commit", job, attempt))
            except psycopg.Error as exc:
                if self._lost(exc):
                    self._reconnect()  # the session, and what it held, is gone anyway
                    return
                self._count_retry(exc)

    def keys_of(self, job: int) -> object:
        """The key as the server knows it, for a parameter."""
        if self.numbered_keys:
            return job
        return self.keys.shown(job, self.log.unknown_keys)

    def _count_claimed(self, rows: list, started: float, returned: float) -> None:
        """After the rows are recorded: the claim's latency, and progress for the coordinator."""
        if rows:
            self.log.claim_latency_ms.append((returned - started) * 1000)
            self.shared.progress[self.index] = len(self.log)

    def _after_lease_claim(self, rows: list, started: float, committed: float) -> None:
        if not self.strategy.has_complete:
            first = self.log.record_claims(rows, committed, committed, [CLAIM_IS_COMPLETION] * len(rows))
            self._note_leases(first, len(rows))
            self._count_claimed(rows, started, committed)
            self._after_commit(rows)
            self._flush(bool(rows))
            return
        first = self.log.record_claims(rows, committed)
        self._count_claimed(rows, started, committed)
        self._note_leases(first, len(rows))
        self._flush(bool(rows))  # under faults, the claims are known before any work starts
        self._finish_each(rows, first)

    def _note_backend(self, first: int, count: int) -> None:
        """Through a pooler: the backend that ran the claim, for its slots from `first` on."""
        if self.claim_backend is not None:
            self.log.backends.extend((slot, self.claim_backend) for slot in range(first, first + count))

    def _note_leases(self, first: int, count: int) -> None:
        """Attach the claim's leases, if it returned any, and its backend through a pooler, to its
        slots from `first` on."""
        if self.pooled:
            self._note_backend(first, count)
        if self.pending_leases:
            for slot in range(first, first + count):
                self._note_lease(slot)

    def _finish_each(self, rows: list[tuple[int, int]], first: int, error: psycopg.Error | None = None) -> None:
        """Lease mode: the claimed jobs (recorded from slot `first` on) worked on and finished one by one,
        each completion its own transaction. `error`: what the first job's completion raised already."""
        for slot, (job, attempt) in enumerate(rows, first):
            outcome = self._finish_resiliently(job, attempt, error)
            error = None
            self.log.end(slot, self._released_at if outcome == FAILED else time.monotonic(), outcome)
            self.stream.mark_ended(slot)
            self._after_commit([(job, attempt)])
            self._flush(True)

    def _bound_completions(self, rows: list[tuple[int, int]], claimed: list[tuple], notes: Notes
                           ) -> list[Sequence[bytes]]:
        """The fast `complete`'s parameters for each claimed (job, attempt), read from the claim's own
        rows `claimed` with these notes (see `bind_claimed`)."""
        if self.bind_claimed is not None and notes.plain:
            return self.bind_claimed(claimed)
        shown = rows if self.numbered_keys else [(self.keys_of(job), attempt) for job, attempt in rows]
        return self.bind_complete.pairs(shown)

    def _flush(self, news: bool) -> None:
        """Under faults a worker may be killed at any moment: what it did reaches the coordinator
        at once. Otherwise nobody dies mid-run, and sending at the plan's flush interval saves CPU
        (each send wakes the coordinator: see claimcheck.engine.logstream.FLUSH_INTERVAL_S)."""
        if news and self.settings.faults is not None:
            self.stream.flush()
        else:
            self.stream.flush_if_due()

    def _work(self, job: int, attempt: int) -> bool:
        """Work on a job; False if the lease could not be extended (the job is no longer ours)."""
        if self.shared.stall is not None and self.shared.stall[self.index] == 1:
            # The stall fault: sleep past the lease without extending it, then carry on.
            self.shared.stalled_job[self.index] = job
            self.shared.stall[self.index] = 2
            self.stream.flush()
            time.sleep(self.settings.lease_seconds * self.settings.faults.stall_factor)
            return True
        if self.no_work:
            return True
        pause = self.settings.work.draw_s(self.rng)
        lease = self.settings.lease_seconds
        if pause <= lease / 2 or not self.strategy.has("extend") or self.settings.mode == "lock":
            if pause > 0:
                time.sleep(pause)
            return True
        # Longer than half a lease: extend it every third of a lease while working, and stop if
        # an extension changes no row (another worker owns the job now).
        deadline = time.monotonic() + pause
        while (left := deadline - time.monotonic()) > 0:
            time.sleep(min(lease / 3, left))
            if time.monotonic() < deadline and not self._extend(job, attempt):
                return False
        return True

    def _job_params(self, section: str, job: int, attempt: int) -> dict:
        """A section's parameters for one job: the fixed ones, plus the job's id and attempt if used."""
        params = self.params[section]
        return {**params, **{k: v for k, v in (("id", self.keys_of(job)), ("attempts", attempt)) if k in params}}

    def _changed(self, section: str, job: int, attempt: int) -> bool:
        """Run a per-job section; did its last statement change (or return) a row? A section of several
        statements is one transaction (in lock mode, the claim's)."""
        params = self._job_params(section, job, attempt)
        if len(self.strategy.steps(section)) == 1 or self.conn.info.transaction_status != pq.TransactionStatus.IDLE:
            return execute_section(self.conn, self.strategy, section, params).rowcount > 0
        with self._transaction():
            return execute_section(self.conn, self.strategy, section, params).rowcount > 0

    def _extend(self, job: int, attempt: int) -> bool:
        return self._changed("extend", job, attempt)

    def _decide_failure(self) -> bool:
        """Does this job fail (at the fail rate)? Decided once per job, before any retry."""
        return bool(self.settings.fail_rate and self.strategy.has("fail")
                    and self.rng.random() < self.settings.fail_rate)

    def _finish_all_in_transaction(self, rows: list[tuple[int, int]]) -> list[int]:
        """Lock mode: each claimed job's outcome, worked on and finished in the claim's transaction."""
        return [self._finish_in_transaction(job, attempt) for job, attempt in rows]

    def _finish_in_transaction(self, job: int, attempt: int) -> int:
        """Lock mode: work and complete (or fail) inside the claim's transaction; a failure of any
        statement rolls the whole cycle back, and the claim loop retries it."""
        if not self._work(job, attempt):
            return ABANDONED
        if not self.strategy.has_complete:
            return CLAIM_IS_COMPLETION
        return self._complete(job, attempt, self._decide_failure())

    def _complete(self, job: int, attempt: int, fails: bool) -> int:
        """Run `complete` (or `fail`) for one job: DONE / FAILED if it changed the row, else STALE."""
        if not fails and self.fast_complete is not None:
            # The hot path: the job's parameters bound as text straight to libpq.
            bound = self.bind_complete.pairs([(self.keys_of(job), attempt)])[0]
            changed = self.fast_complete.rowcount(bound) > 0
        else:
            changed = self._changed("fail" if fails else "complete", job, attempt)
        if not changed:
            return STALE
        return FAILED if fails else DONE

    def _finish_resiliently(self, job: int, attempt: int, error: psycopg.Error | None = None) -> int:
        """Lease mode: the completion is its own transaction; retry it through failures and
        reconnects. The work is done once, and whether the job fails is decided once. `error`: what
        the completion's first try raised (in `_plain_cycles`, where there is no work and no failure
        to decide), handled as this loop's own."""
        if not self._work(job, attempt):
            return ABANDONED
        fails = self._decide_failure()
        # The ledger accepts a re-claim after a requeue only if the requeue came first. Another
        # worker can re-claim the job the moment our `fail` commits, and record its claim before
        # we read the clock again (a busy machine deschedules us): so a requeue is timed before
        # it was first sent, a moment no re-claim can precede. (A claim is timed after its commit.)
        if fails:
            self._released_at = time.monotonic()
        for _ in range(MAX_COMPLETION_RETRIES):
            try:
                if error is not None:
                    raise error
                outcome = self._complete(job, attempt, fails)
                self.consecutive_failures = 0
                return outcome
            except psycopg.Error as exc:
                error = None
                if not self._lost(exc):
                    if exc.sqlstate is None:
                        raise
                    self._count_retry(exc)
                    self._back_off()
                    continue
                self._reconnect()
                if self.strategy.own_schema:
                    continue  # no status column we know of: the completion is run again, fenced or not
                # The lost statement may have committed: the row says whether it did.
                row = self.conn.execute(QUERIES["job_state"], {"id": job}).fetchone()
                if row and row[1] == attempt:
                    if not fails and row[0] == "done":
                        return DONE
                    if fails and row[0] in ("queued", "failed") and row[2] == INJECTED_ERROR:
                        return FAILED
        raise RuntimeError(f"completion of job {job} failed {MAX_COMPLETION_RETRIES} times in a row")

    def _reconnect(self) -> None:
        """The connection is gone (terminated backend, restarting server): open a new one, unless
        the run is stopping (the coordinator ends the backend of a worker stuck in a statement, see
        claimcheck.engine.sampler.stuck_backends: reconnecting would run that statement again)."""
        if self.shared.stop.value:
            raise _Stopping
        self.log.reconnects += 1
        try:
            self.conn.close()
        except Exception:
            pass
        self.conn = connect_when_up(self.plan, self.index, self.shared)
        self._prepare_fast_paths()

    def _back_off(self) -> None:
        """Sleep a random, growing pause before a retry: retrying at once under SERIALIZABLE
        meets the same concurrent claims again and can fail indefinitely."""
        self.consecutive_failures += 1
        ceiling = min(RETRY_BACKOFF_CAP_S, RETRY_BACKOFF_BASE_S * 2 ** self.consecutive_failures)
        time.sleep(self.rng.uniform(0, ceiling))

    def _count_retry(self, exc: psycopg.Error) -> None:
        """A server error is an outcome of the claim (or completion): counted by its SQLSTATE."""
        state = exc.sqlstate or "?"
        self.log.sqlstates[state] = self.log.sqlstates.get(state, 0) + 1
        if isinstance(exc, errors.SerializationFailure):
            self.log.serialization_failures += 1
        elif isinstance(exc, errors.DeadlockDetected):
            self.log.deadlocks += 1
        if self.consecutive_failures >= MAX_CONSECUTIVE_ERRORS:
            message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise RuntimeError(f"the claim failed {MAX_CONSECUTIVE_ERRORS} times in a row, last with {state}: "
                               f"{message}; that is not contention but a statement that cannot succeed")

