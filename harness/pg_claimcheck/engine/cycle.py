"""The claim cycles of a worker: a lease cycle and a lock cycle, each owning its bookkeeping order once.

A cycle claims, works and completes through a backend (see pg_claimcheck.engine.backend), and records
what committed in the worker's :class:`pg_claimcheck.verdict.ledger.WorkerLog`. The ledger's rules
(docs/contracts.md, section 2) judge those records by their order and their times, so the order is
written once, here, for both modes:

1. The claim's transaction commits; only then are its notes kept (over-claims, attempts above the
   maximum, unknown keys): a rolled-back claim is no claim, and proves nothing.
2. Its rows are recorded, timed once the commit returned (no other worker can have seen them
   sooner), with the leases it returned and, through a pooler, the backend that ran it.
3. Progress is counted for the coordinator, after the records it counts.
4. Each job ends (lease mode: its completion, its own transaction; lock mode: inside the claim's),
   a requeue timed before it was first sent (a re-claim by another worker cannot precede that
   moment; see `LeaseCycle._finish_resiliently`).
5. `after_commit` runs once the transaction that ended the job's ownership has committed.
6. The records are flushed: at once under faults (the worker may be killed any moment), else when
   the plan's flush interval is due.

A server error raised inside a claim or a completion is counted by SQLSTATE and retried after a
random pause on the same connection (reconnecting would drop the session's advisory locks and change
what is tested); only a lost connection is re-established.
"""
from __future__ import annotations

import math
import random
import time
from typing import TYPE_CHECKING

import psycopg
from psycopg import errors

from pg_claimcheck.contract.claimrows import ClaimRows, Notes
from pg_claimcheck.contract.keys import key_of
from pg_claimcheck.contract.strategy import server_message
from pg_claimcheck.engine.backend import INJECTED_ERROR, Backend, Stopping
from pg_claimcheck.engine.logstream import LogStream
from pg_claimcheck.engine.shared import STALL_ASKED, STALL_ENDED, STALLED, Shared, SlotArray, Slots
from pg_claimcheck.errors import SqlFileError
from pg_claimcheck.verdict.ledger import ABANDONED, CLAIM_IS_COMPLETION, DONE, FAILED, STALE, WorkerLog
from pg_claimcheck.verdict.observed import WorkerTelemetry

if TYPE_CHECKING:  # the worker module runs the cycles: it imports this one
    from pg_claimcheck.engine.worker import WorkerPlan

MAX_COMPLETION_RETRIES = 100
RETRY_BACKOFF_BASE_S = 0.0005
RETRY_BACKOFF_CAP_S = 0.05
HOLD_LOOK_S = 0.01
"""How often a worker holding a sleeper's job looks whether the sleeper has finished it."""
OVER_CLAIM_STEP = 1000
"""The completions of an over-claim sent in one backend call, between looks at the run's stop."""
MAX_CONSECUTIVE_ERRORS = 1000
"""A claim that fails this many times in a row on one worker (each retried after a pause) is not
contention but a broken statement: the worker gives up and the run is not judged."""


class Cycle:
    """What both modes share: reading a claim, keeping what committed, the per-job work, and the
    retry rules. `claims` is the mode's cycle."""

    def __init__(self, plan: WorkerPlan, index: int, backend: Backend, log: WorkerLog, telemetry: WorkerTelemetry,
                 shared: Shared, stream: LogStream) -> None:
        self.plan, self.index, self.backend, self.log, self.shared, self.stream = plan, index, backend, log, shared, stream
        self.telemetry = telemetry
        """What the worker measures (counts, latencies, errors), kept apart from `log`, the ledger's input."""
        self.settings = s = plan.settings
        self.strategy = plan.strategy
        self.rng = random.Random(index)
        self.reader = ClaimRows(plan.shape, plan.keys, plan.limit.rows, cut=plan.stops_on_proof)
        self.no_work = s.work.kind == "fixed" and s.work.a_ms == 0
        """Zero work time (a parity run): nothing to draw or sleep per job."""
        self.completes = plan.strategy.has_complete
        """False: each claim is its jobs' completion."""
        self.unlocks = plan.strategy.has("after_commit")
        self.may_fail = bool(s.fail_rate and plan.strategy.has("fail"))
        self.stalls = s.faults is not None and shared.stall is not None
        """A fault run with the stall switches: the only runs whose claims look at them (a fork run has
        the shared arrays whether or not it injects faults)."""
        self.alike = self.completes and self.no_work and not self.unlocks and s.faults is None \
            and not self.may_fail
        """Nothing happens per job but its completion (no work time, no failure to decide, no fault, no
        unlock): a claim's completions go to the backend in one call (`complete_each`).

        Why one call: with 16 workers and their backends on 2 cores, a worker is switched out at every
        round trip and resumes on a cold cache, where each Python call per job costs far more than its
        instructions (see pg_claimcheck.engine.fastpath.PreparedStatement.rowcount_each)."""
        self.consecutive_failures = 0
        self.pending_leases: list[tuple[float, float]] = []

    def claims(self) -> int:
        """Claim (and finish) again and again while claims return jobs and the run goes on, in one
        Python frame. Returns the last claim's row count (0: empty, for the loop to handle; else the
        run is stopping or reached its claims). An error ends it, its claim undone or completed."""
        raise NotImplementedError

    def _done(self) -> bool:
        """After a claim that returned jobs: is the run stopping, or has this worker made its claims?"""
        self.consecutive_failures = 0
        limit = self.settings.claims_per_worker
        return bool(self.shared.stop.value) or (limit is not None and self.telemetry.claim_statements >= limit)

    def _read(self, claimed: list[tuple], started: float) -> tuple[list[tuple[int, int]], Notes]:
        """(job number, attempt) per row (see pg_claimcheck.contract.claimrows); the notes wait for the commit."""
        rows, notes = self.reader.read(claimed, started)
        if notes.leases:
            # The server's clock right after the claim: a re-take is judged against the earlier
            # holder's lease_until with the server's time, never the client's.
            server_now = self.backend.server_now()
            self.pending_leases = [(server_now, until) for until in notes.leases]
        elif self.pending_leases:
            self.pending_leases = []
        return rows, notes

    def _committed(self, rows: list[tuple[int, int]], notes: Notes, claimed_at: float, latency_ms: float,
                   ended_at: float = math.nan, outcomes: list[int] | None = None) -> int:
        """Steps 1 to 3 for a claim whose transaction committed: its notes, its rows (with `outcomes`
        and `ended_at` when they ended in it), their leases and backend, the progress. The first slot."""
        log = self.log
        if not notes.plain:  # the plain reading notes nothing
            log.unknown_keys.update(notes.unknown_keys)
            log.over_attempts.extend(notes.over_attempts)
            log.over_claims.extend(notes.over_claims)
            if notes.over_claims and self.plan.stops_on_proof:
                # Proof of a violation (pg_claimcheck.engine.watch): sent at once, so that the coordinator stops
                # the run. Only the rows the claim asked for are recorded (ClaimRows.cut).
                self.stream.flush()
        first = log.record_claims(rows, claimed_at, ended_at, outcomes)
        if self.backend.backend_pid is not None:  # through a pooler: once per claim, not per job
            log.backends.extend((slot, self.backend.backend_pid) for slot in range(first, first + len(rows)))
        if self.pending_leases:
            log.leases.extend((slot, now, until) for slot, (now, until) in enumerate(self.pending_leases, first))
            self.pending_leases = []
        if rows:
            self.telemetry.claim_latency_ms.append(latency_ms)
            self.shared.progress[self.index] = len(log)
        return first

    def _after_commit(self, rows: list[tuple[int, int]]) -> None:
        """The file's `after_commit` (the unlock of a session advisory lock), per job, on this
        connection, once the transaction that ended the job's ownership has committed (a file
        with the section: `unlocks`)."""
        for job, attempt in rows:
            try:
                self.backend.change("after_commit", job, attempt)
            except psycopg.Error as exc:
                if self.backend.lost(exc):
                    self.reconnect(exc)  # the session, and what it held, is gone anyway
                    return
                self.count_retry(exc)

    def _flush(self) -> None:
        """Under faults a worker may be killed at any moment: what it did reaches the coordinator
        at once. Otherwise nobody dies mid-run, and sending at the plan's flush interval saves CPU
        (each send wakes the coordinator: see pg_claimcheck.engine.logstream.FLUSH_INTERVAL_S)."""
        if self.settings.faults is not None:
            self.stream.flush()
        else:
            self.stream.flush_if_due()

    def _work(self, job: int, attempt: int) -> bool:
        """Work on a job; False if the lease could not be extended (the job is no longer ours)."""
        shared, s = self.shared, self.settings
        if self.stalls:
            assert shared.stall is not None and s.faults is not None  # self.stalls says so
            assert shared.stalled_job is not None and shared.stalled_at is not None  # Shared.forked's
            sleeper = self._asleep_on(job, shared.stall, shared.stalled_job) if s.mode != "lock" else None
            if sleeper is not None and not self._hold_until_woken(sleeper, shared.stall, job, attempt,
                                                                  s.faults.stall_factor):
                return False
            # Due now, or while we held a sleeper's job (the others may drain the queue meanwhile, and
            # this worker would claim nothing more to stall after): sleep on this job.
            if self._stall_due(shared.stall):
                # The stall fault: sleep past the lease without extending it, then carry on.
                shared.stalled_job[self.index], shared.stalled_at[self.index] = job, time.monotonic()
                shared.stall[self.index] = STALLED
                self.stream.flush()
                time.sleep(s.lease_seconds * s.faults.stall_factor)
                return True
            if sleeper is not None:
                return True
        if self.no_work:
            return True
        pause, lease = s.work.draw_s(self.rng), s.lease_seconds
        if pause <= lease / 2 or not self.strategy.has("extend") or s.mode == "lock":
            if pause > 0:
                time.sleep(pause)
                if s.mode == "lock":  # idle in the claim's transaction: the server may have ended it
                    self.backend.heard()
            return True
        # Longer than half a lease: extend it every third of a lease while working, and stop if
        # an extension changes no row (another worker owns the job now).
        deadline = time.monotonic() + pause
        while (left := deadline - time.monotonic()) > 0:
            time.sleep(min(lease / 3, left))
            if time.monotonic() < deadline and not self.backend.change("extend", job, attempt):
                return False
        return True

    def _stall_due(self, stall: Slots) -> bool:
        """Asked to stall, and the run's claims have reached this worker's mark (0 when asked at a tick)."""
        at = self.shared.stall_at
        return stall[self.index] == STALL_ASKED and (at is None or self.shared.claimed() >= at[self.index])

    def _asleep_on(self, job: int, stall: Slots, stalled_job: SlotArray) -> int | None:
        """The worker asleep in a stall on `job` (its lease ended, and we took the job), or None."""
        return next((w for w in range(len(stalled_job)) if w != self.index
                     and stall[w] == STALLED and stalled_job[w] == job), None)

    def _hold_until_woken(self, sleeper: int, stall: Slots, job: int, attempt: int, stall_factor: float) -> bool:
        """Work on a job whose earlier holder is asleep in a stall until the sleeper has finished it,
        extending our lease where the file can. Taken back and completed at once, the job would be
        finished before the sleeper wakes: a completion that deletes the row by its id alone then
        changes nothing, and its unfenced write was never seen (pgqueuer 1.3's, caught in 6 of 10
        runs, only when the second stall landed on the worker that had taken the first job). Held,
        the sleeper's completion lands while we own the job, as it does when work takes as long
        as the sleep. False if an extension changed no row: the job is no longer ours."""
        lease, extends, stop = self.settings.lease_seconds, self.strategy.has("extend"), self.shared.stop
        deadline = time.monotonic() + lease * (stall_factor + 2)  # the sleep, and the sleeper's completion
        next_extend = time.monotonic() + lease / 3
        while stall[sleeper] == STALLED and not stop.value and time.monotonic() < deadline:
            time.sleep(HOLD_LOOK_S)
            if extends and time.monotonic() >= next_extend and stall[sleeper] == STALLED:
                if not self.backend.change("extend", job, attempt):
                    return False
                next_extend = time.monotonic() + lease / 3
        return True

    def _woke(self, job: int) -> None:
        """After this worker finished `job`: if it was asleep on it, say the sleeper's completion is done."""
        stall, stalled_job = self.shared.stall, self.shared.stalled_job
        assert stall is not None and stalled_job is not None  # called only when self.stalls
        if stall[self.index] == STALLED and stalled_job[self.index] == job:
            stall[self.index] = STALL_ENDED

    def _decide_failure(self) -> bool:
        """Does this job fail (at the fail rate)? Decided once per job, before any retry."""
        return self.may_fail and self.rng.random() < self.settings.fail_rate

    def _complete(self, job: int, attempt: int, fails: bool) -> int:
        """Run `complete` (or `fail`) for one job: DONE / FAILED if it changed the row, else STALE."""
        if not self.backend.change("fail" if fails else "complete", job, attempt):
            return STALE
        return FAILED if fails else DONE

    def reconnect(self, cause: psycopg.Error | None = None) -> None:
        """The connection is gone (terminated backend, restarting server): open a new one, unless
        the run is stopping (the coordinator ends the backend of a worker stuck in a statement, see
        pg_claimcheck.engine.sampler.stuck_backends: reconnecting would run that statement again).
        `cause`: the error that showed it; the SQLSTATE the server sent as it ended the session (a
        timeout of its own) is counted, to be named if the run makes no progress."""
        if self.shared.stop.value:
            raise Stopping
        state = getattr(cause, "sqlstate", None) or getattr(self.backend, "ended_by", None)
        if state:
            self.telemetry.lost_sqlstates[state] = self.telemetry.lost_sqlstates.get(state, 0) + 1
        self.telemetry.reconnects += 1
        self.backend.reconnect()

    def back_off(self) -> None:
        """Sleep a random, growing pause before a retry: retrying at once under SERIALIZABLE
        meets the same concurrent claims again and can fail indefinitely."""
        self.consecutive_failures += 1
        ceiling = min(RETRY_BACKOFF_CAP_S, RETRY_BACKOFF_BASE_S * 2 ** self.consecutive_failures)
        time.sleep(self.rng.uniform(0, ceiling))

    def count_retry(self, exc: psycopg.Error) -> None:
        """A server error is an outcome of the claim (or completion): counted by its SQLSTATE."""
        state = exc.sqlstate or "?"
        self.telemetry.sqlstates[state] = self.telemetry.sqlstates.get(state, 0) + 1
        if isinstance(exc, errors.SerializationFailure):
            self.telemetry.serialization_failures += 1
        elif isinstance(exc, errors.DeadlockDetected):
            self.telemetry.deadlocks += 1
        if self.consecutive_failures >= MAX_CONSECUTIVE_ERRORS:
            raise SqlFileError(server_message(
                self.strategy, self.strategy.picking_section, None, exc,
                during=f" in the claim's transaction, {MAX_CONSECUTIVE_ERRORS} times in a row",
                outcome="That is not contention but a statement that cannot succeed: the run is not judged."))


class LeaseCycle(Cycle):
    """`lease` mode: the claim commits on its own (one round trip for a lone statement in autocommit;
    a pick or a claim of several statements in an explicit transaction), then each job is worked on
    outside any transaction and completed in a short transaction of its own."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.explicit = self.strategy.has_pick or len(self.strategy.steps("claim")) > 1
        self._released_at = 0.0
        """When the last `fail` (a requeue) was first sent: see _finish_resiliently."""

    def claims(self) -> int:
        telemetry, backend, clock = self.telemetry, self.backend, time.monotonic
        while True:
            telemetry.claim_statements += 1
            started = clock()
            if self.explicit:
                with backend.transaction():
                    claimed = backend.claim()
                    rows, notes = self._read(claimed, started)
            else:
                claimed = backend.claim()
                rows, notes = self._read(claimed, started)
            committed = clock()  # a lease claim is timed once its commit returned
            if self.completes:
                first = self._committed(rows, notes, committed, (committed - started) * 1000)
            else:
                first = self._committed(rows, notes, committed, (committed - started) * 1000, committed,
                                        [CLAIM_IS_COMPLETION] * len(rows))
            if not rows:
                return 0
            if not self.completes:
                if self.unlocks:
                    self._after_commit(rows)
                self._flush()
            elif self.alike:
                self._complete_all(rows, claimed, notes, first)
            else:
                self._flush()  # under faults, the claims are known before any work starts
                self._finish_each(rows, first, stops=bool(notes.over_claims))
            if self._done():
                return len(rows)

    def _complete_all(self, rows: list[tuple[int, int]], claimed: list[tuple], notes: Notes, first: int) -> None:
        """The completions of a claim of `alike` jobs, one backend call for the claim. No fault can
        kill this worker in between: the claims reach the coordinator with their endings, at the next
        flush that is due. An over-claim's (which may be a million rows) go OVER_CLAIM_STEP at a time,
        stopping when the run stops: its proof has ended the run (see `_committed`)."""
        step = OVER_CLAIM_STEP if notes.over_claims else max(len(rows), 1)
        for start in range(0, len(rows), step):
            if start and self.shared.stop.value:
                return
            part = rows[start:start + step]
            counts, ended, error = self.backend.complete_each(part, claimed[start:start + step], notes.plain,
                                                              time.monotonic)
            self.log.end_all(first + start, ended, [DONE if n else STALE for n in counts])
            if error is not None:  # the rest of the claim, from the job that raised, retried one by one
                done = start + len(counts)
                self._finish_each(rows[done:], first + done, error, stops=bool(notes.over_claims))
                return
            self.stream.flush_if_due()

    def _finish_each(self, rows: list[tuple[int, int]], first: int, error: psycopg.Error | None = None,
                     stops: bool = False) -> None:
        """The claimed jobs (recorded from slot `first` on) worked on and finished one by one, each
        completion its own transaction. `error`: what the first job's completion raised already.
        `stops`: an over-claim's jobs, left unfinished once the run stops (its proof stopped it)."""
        for slot, (job, attempt) in enumerate(rows, first):
            if stops and self.shared.stop.value:
                return
            outcome = self._finish_resiliently(job, attempt, error)
            error = None
            self.log.end(slot, self._released_at if outcome == FAILED else time.monotonic(), outcome)
            if self.stalls:
                self._woke(job)
            self.stream.mark_ended(slot)
            if self.unlocks:
                self._after_commit([(job, attempt)])
            self._flush()

    def _finish_resiliently(self, job: int, attempt: int, error: psycopg.Error | None = None) -> int:
        """The completion is its own transaction: retry it through failures and reconnects. The work
        is done once, and whether the job fails is decided once. `error`: what the completion's first
        try raised (in `complete_each`, where there is no work and no failure to decide), handled as
        this loop's own."""
        if not self._work(job, attempt):
            return ABANDONED
        fails = self._decide_failure()
        # The ledger accepts a re-claim after a requeue only if the requeue came first. Another
        # worker can re-claim the job the moment our `fail` commits, and record its claim before
        # we read the clock again (a busy machine deschedules us): so a requeue is timed before
        # it was first sent, a moment no re-claim can precede. (A claim is timed after its commit.)
        if fails:
            self._released_at = time.monotonic()
        last = None
        for _ in range(MAX_COMPLETION_RETRIES):
            try:
                if error is not None:
                    raise error
                outcome = self._complete(job, attempt, fails)
                self.consecutive_failures = 0
                return outcome
            except psycopg.Error as exc:
                error, last = None, exc
                if not self.backend.lost(exc):
                    if exc.sqlstate is None:
                        raise
                    self.count_retry(exc)
                    self.back_off()
                    continue
                self.reconnect(exc)
                if self.strategy.own_schema:
                    continue  # no status column we know of: the completion is run again, fenced or not
                # The lost statement may have committed: the row says whether it did.
                row = self.backend.job_state(job)
                if row and row[1] == attempt:
                    if not fails and row[0] == "done":
                        return DONE
                    if fails and row[0] in ("queued", "failed") and row[2] == INJECTED_ERROR:
                        return FAILED
        assert last is not None  # the loop ran MAX_COMPLETION_RETRIES > 0 times, each ending in an error
        key = key_of(self.plan.keys, job, self.log.unknown_keys, self.plan.shape.key_is_int)
        raise SqlFileError(server_message(
            self.strategy, "fail" if fails else "complete", None, last,
            during=f" for job {key!r}, {MAX_COMPLETION_RETRIES} times in a row",
            outcome="The run is not judged; fix the statement and try again."))


class LockCycle(Cycle):
    """`lock` mode: claim, work and complete (or fail) in one transaction, recorded once it
    committed. A failure of any statement rolls the whole cycle back: nothing of it is recorded,
    and the loop retries the claim."""

    def claims(self) -> int:
        log, telemetry, backend, clock = self.log, self.telemetry, self.backend, time.monotonic
        while True:
            telemetry.claim_statements += 1
            started = clock()
            with backend.transaction():
                claimed = backend.claim()
                rows, notes = self._read(claimed, started)
                returned = clock()
                if self.alike and rows:
                    counts, _, error = backend.complete_each(rows, claimed, notes.plain)
                    if error is not None:
                        raise error
                    outcomes = [DONE if n else STALE for n in counts]
                else:
                    outcomes = [self._finish_in_transaction(job, attempt) for job, attempt in rows]
                commit_sent = clock()
            committed = clock()
            first = self._committed(rows, notes, committed, (returned - started) * 1000, committed, outcomes)
            if self.may_fail and FAILED in outcomes:
                # A requeue is timed when its COMMIT was sent: no later claim can have seen it sooner
                # (see LeaseCycle._finish_resiliently). A claim is timed once its commit returned.
                for slot, outcome in enumerate(outcomes, first):
                    if outcome == FAILED:
                        log.ended_at[slot] = commit_sent
            if not rows:
                return 0
            if self.stalls:
                for job, _ in rows:
                    self._woke(job)
            if self.unlocks:
                self._after_commit(rows)
            self._flush()
            if self._done():
                return len(rows)

    def _finish_in_transaction(self, job: int, attempt: int) -> int:
        """Work and complete (or fail) inside the claim's transaction."""
        if not self._work(job, attempt):
            return ABANDONED
        if not self.completes:
            return CLAIM_IS_COMPLETION
        return self._complete(job, attempt, self._decide_failure())


def cycle_for(plan: WorkerPlan, index: int, backend: Backend, log: WorkerLog, telemetry: WorkerTelemetry,
              shared: Shared, stream: LogStream) -> Cycle:
    """The cycle of the plan's mode."""
    cycle = LockCycle if plan.settings.mode == "lock" else LeaseCycle
    return cycle(plan, index, backend, log, telemetry, shared, stream)
