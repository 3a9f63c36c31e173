"""Where double claims are counted: the exactly-once ledger, as pure functions of plain data.

Each worker records its committed claims locally (job id, attempt, when the claim committed,
when and how its ownership ended) and streams them to the coordinator in batches; the reaper
records which claims it returned to the queue. This module judges the combined history by the
rules in docs/contracts.md (section 2):

- a claim counts only once its transaction committed (workers record nothing else);
- a re-claim of a job is a **redelivery** (at-least-once behaviour, not a violation) when every
  earlier claim of it had been released before it: failed and requeued by its worker, returned
  by the reaper, or its lease (the claim's `lease_until` column) had ended by the server's clock
  when the re-claim ran;
- otherwise it is a **double claim**: the job was handed to a second worker while an earlier
  claim was live, or after it had been completed;
- a completion (or failure) that changed the row after its claim had been reaped, or after its
  lease ended and the job was re-claimed, is a **stale completion** violation; one that changed
  no row was fenced off and is only counted;
- a claim that returned more rows than it asked for (its limit: `%(batch)s`, or the LIMIT written
  in its text) is an **over-claim**, and a claim
  whose attempt number is above the job's `max_attempts` (a column the claim returns) is an
  **over-attempt**: both violations, with evidence;
- a seeded job never claimed by the end of a drain is `unclaimed`; a claimed id that was never
  seeded is `unexpected`. Both fail the run, like Jepsen's lost / unexpected;
- in a run where nothing releases a claim (no reaper, no failures, no faults), a claimed job that
  no claim finished (its completion changed no row) is **never finished**: `complete` does not
  match the row the claim took, and the job can never be finished without a double claim;
- a job is **finished** (counted as done) when a claim of it finished it: a completion that
  changed the row, or a claim that is itself the completion. The ledger counts them, not the
  table, so a queue that deletes finished jobs is counted too.

Times are `time.monotonic()` readings, which Linux keeps system-wide, so the logs of different
processes share one clock; leases are compared with the server's clock only (the lease's end and
the re-claim's server time are both the server's readings). Jobs are dense numbers (see
:mod:`pg_claimcheck.contract.keys`); evidence shows the keys.
"""
from __future__ import annotations

import math
from array import array
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pg_claimcheck.contract.keys import KeySpace



class ViolationKind(StrEnum):
    """What a job's evidence shows (docs/contracts.md section 2), the JSON's `kind`. A StrEnum: it equals
    its string and is written as it."""

    CONCURRENT = "concurrent"
    """Claimed again while an earlier claim was live."""
    AFTER_DONE = "after-done"
    """Claimed again after it was finished."""
    STALE_COMPLETION = "stale-completion"
    """Changed by a worker that no longer owned it."""
    NEVER_FINISHED = "never-finished"
    """Finished by nobody and held by nobody: every claim's completion changed no row."""
    OVER_CLAIM = "over-claim"
    """One claim returned more rows than its limit."""


# How a claim's ownership ended.
LIVE = 0
"""Never ended: the run stopped, or the worker died, while it held the job."""
DONE = 1
"""The worker's completion changed the row."""
STALE = 2
"""The worker's completion (or failure) changed no row: it no longer owned the job."""
CLAIM_IS_COMPLETION = 3
"""The strategy has no `complete`: the claim statement itself finishes the job."""
FAILED = 4
"""The worker's `fail` changed the row: the job was requeued with backoff, or failed for good."""
ABANDONED = 5
"""The worker's lease extension changed no row, so it stopped working on the job."""
OUTCOME_NAMES = {LIVE: "live", DONE: "done", STALE: "changed no row", CLAIM_IS_COMPLETION: "claim completes",
                 FAILED: "failed", ABANDONED: "abandoned"}
_CHANGED_ROW = (DONE, FAILED)
_FINISHED = (DONE, CLAIM_IS_COMPLETION)

RECORD_COLUMNS = {"job": "q", "attempt": "q", "claimed_at": "d", "ended_at": "d", "outcome": "b"}
"""A record's columns and their array type codes: WorkerLog's, and a log delta's on the wire
(pg_claimcheck.engine.logstream)."""


def record_column(name: str) -> Any:
    """A dataclass field holding one record column, empty, of its type code."""
    return field(default_factory=lambda: array(RECORD_COLUMNS[name]))


MAX_EVIDENCE = 20  # violations kept with full evidence; the counts are always complete
MAX_CLAIMS_SHOWN = 50  # claims kept per violation


@dataclass
class WorkerLog:
    """What one worker recorded of its committed claims, locally: the ledger's input, all of it (its
    latencies, counts and errors are its telemetry, pg_claimcheck.verdict.observed.WorkerTelemetry,
    which the ledger never reads)."""

    worker: int
    job: array[Any] = record_column("job")
    attempt: array[Any] = record_column("attempt")
    claimed_at: array[Any] = record_column("claimed_at")
    ended_at: array[Any] = record_column("ended_at")
    outcome: array[Any] = record_column("outcome")
    leases: list[Any] = field(default_factory=list)
    """(slot, server time right after the claim, lease_until), both epoch seconds, for claims that
    return `lease_until`."""
    over_claims: list[Any] = field(default_factory=list)
    """(claimed_at, rows returned, job numbers) of claims that returned more rows than the batch."""
    over_attempts: list[Any] = field(default_factory=list)
    """(job, attempt, max_attempts) of claims whose attempt was above the job's max_attempts."""
    unknown_keys: dict[int, str] = field(default_factory=dict)
    """Number -> key text of claimed keys that were never seeded."""
    backends: list[Any] = field(default_factory=list)
    """(slot, backend pid) of claims made through a pooler (see pg_claimcheck.server.runcontext), where
    one client connection's transactions run on many backends and one backend serves many clients."""

    def record(self, job: int, attempt: int, claimed_at: float, ended_at: float = math.nan,
               outcome: int = LIVE) -> int:
        self.job.append(job)
        self.attempt.append(attempt)
        self.claimed_at.append(claimed_at)
        self.ended_at.append(ended_at)
        self.outcome.append(outcome)
        return len(self.job) - 1

    def record_claims(self, rows: list[tuple[int, int]], claimed_at: float, ended_at: float = math.nan,
                      outcomes: list[int] | None = None) -> int:
        """`record` for each (job, attempt) of one claim, claimed (and ended) at the same moment; the
        first slot (the others follow in row order). `outcomes`: one per row, else LIVE."""
        first, n = len(self.job), len(rows)
        if n:  # whole arrays, not lists: no conversion per value (a claim of a worker's hot path)
            jobs, attempts = zip(*rows)
            self.job.extend(jobs)
            self.attempt.extend(attempts)
            self.claimed_at.extend(array("d", (claimed_at,)) * n)
            self.ended_at.extend(array("d", (ended_at,)) * n)
            self.outcome.frombytes(bytes(outcomes) if outcomes is not None else bytes((LIVE,)) * n)
        return first

    def end_all(self, first: int, ended_at: list[float], outcomes: list[int]) -> None:
        """`end` for the slots from `first` on, one per value."""
        self.ended_at[first:first + len(ended_at)] = array("d", ended_at)
        # From bytes, an array copies the values: from a list it would convert each one.
        self.outcome[first:first + len(outcomes)] = array("b", bytes(outcomes))

    def end(self, index: int, ended_at: float, outcome: int) -> None:
        self.ended_at[index] = ended_at
        self.outcome[index] = outcome

    def __len__(self) -> int:
        return len(self.job)

    def last_event(self) -> float:
        """When this log last recorded something of a job: a claim or an end (NaN for none)."""
        if not len(self):
            return math.nan
        ended = max(filter(math.isfinite, self.ended_at), default=-math.inf)  # a job not ended has NaN
        return float(max(max(self.claimed_at), ended))


@dataclass(frozen=True)
class Reap:
    """The reaper returned claim `attempt` of `job` to the queue (or failed it) at `at`."""

    job: int
    attempt: int
    at: float


@dataclass(frozen=True)
class Claim:
    """One committed claim, as shown in evidence."""

    worker: int
    attempt: int
    claimed_at_s: float
    ended_at_s: float | None
    outcome: str
    reaped_at_s: float | None = None
    backend_pid: int | None = None
    """The backend that ran the claim, when it went through a pooler."""


@dataclass(frozen=True)
class Violation:
    """A job handed to more than one worker, or changed by a worker that no longer owned it."""

    job: object
    """The job's key."""
    kind: ViolationKind
    """`concurrent`: claimed again while an earlier claim was live; `after-done`: claimed again
    after an earlier claim completed it; `stale-completion`: a reaped (or lease-expired and
    re-claimed) claim's worker changed the row; `never-finished`: nothing released the claim, yet
    its completion changed no row."""
    claims: tuple[Claim, ...]
    """The first MAX_CLAIMS_SHOWN claims of the job, in attempt order."""
    times_claimed: int = 0
    """All its claims (a claim that takes nothing hands one job out thousands of times)."""

    def as_dict(self) -> dict[str, Any]:
        return {"job": self.job, "kind": self.kind, "times_claimed": self.times_claimed,
                "claims": [c.__dict__ for c in self.claims]}


@dataclass(frozen=True)
class Verdict:
    """The ledger's judgement of one run."""

    claims: int
    unique_jobs_claimed: int
    double_claimed_jobs: int
    extra_claims: int
    """Claims beyond one per job, redeliveries included."""
    unclaimed_jobs: int
    """Seeded jobs never claimed by the end of a drain: lost. 0 for a run that did not drain."""
    unexpected_jobs: int
    stale_completions: int
    """Completions or failures fenced off (they changed no row): harmless, counted."""
    violations: tuple[Violation, ...]
    """At most MAX_EVIDENCE of them, lowest job ids first."""
    drained: bool
    redeliveries: int = 0
    """Re-claims after a release (failure, reaper, lease expiry): at-least-once, not a violation."""
    stale_completion_violations: int = 0
    """Completions or failures that changed a row after the claim had been reaped."""
    unrecorded_claims: int = 0
    """Jobs finished in the table whose claim died with a killed worker before it was streamed:
    not lost, so not counted as unclaimed."""
    jobs_finished: int = 0
    """Distinct jobs a claim finished: its completion changed the row, or the claim completes the job."""
    never_finished: int = 0
    """Claimed jobs whose every claim ended with a completion that changed no row, in a run where
    nothing releases a claim (judged with `releases=False`): `complete` never matched."""
    over_claims: int = 0
    """Claims that returned more rows than the batch they asked for."""
    over_attempts: int = 0
    """Claims whose attempt number was above the job's max_attempts (as the claim returned it)."""
    shape_evidence: tuple[dict[str, Any], ...] = ()
    """Evidence of over-claims and over-attempts (at most MAX_EVIDENCE)."""
    unreached_jobs: int = 0
    """Seeded jobs never claimed by a run that ended before its drain (stopped at a proven violation,
    a limit, no progress): not lost, since nothing tried them."""
    reruns_against_promise: int = 0
    """Re-executions after a failure by a queue library that promises at-most-once
    (pg_claimcheck.engine.judge.held_to_promise): what it said it never does, so a violation."""
    lost_as_promised: int = 0
    """Jobs a library that promises at-most-once ended without after an injected fault: it said it may
    lose them, so they are reported and not a violation (counted out of `unclaimed_jobs`)."""

    @property
    def exactly_once(self) -> bool:
        return (self.double_claimed_jobs == 0 and self.stale_completion_violations == 0
                and self.unexpected_jobs == 0 and self.unclaimed_jobs == 0 and self.never_finished == 0
                and self.over_claims == 0 and self.over_attempts == 0 and self.reruns_against_promise == 0)


@dataclass
class _Seen:
    worker: int
    attempt: int
    claimed_at: float
    ended_at: float
    outcome: int
    server_at: float = math.nan
    """The server's clock right after the claim (only for claims that return their lease)."""
    lease_until: float = math.nan
    backend_pid: int | None = None


def judge(logs: list[WorkerLog], first_id: int, last_id: int, *, drained: bool, origin: float = 0.0,
          reaps: list[Reap] | None = None, releases: bool = True, keys: KeySpace | None = None,
          limit: int | None = None) -> Verdict:
    """Judge the combined logs of a run over seeded ids `first_id..last_id`.

    `drained` says the run went until no job was left, so unclaimed jobs are lost jobs.
    `releases` says claims may be released (reaper, failures, faults), so a completion that
    changed no row may have been fenced off rightly; without releases it is a broken `complete`.
    `reaps` are the reaper's returns, each timed before its statement was sent (so before it
    committed).
    `origin` is subtracted from times shown in evidence. Memory stays linear in the number of
    jobs (one counter per id) plus the claims of jobs claimed more than once. `keys` (a
    :class:`pg_claimcheck.contract.keys.KeySpace`) turns job numbers back into keys for the evidence;
    `limit`, the claim's (see pg_claimcheck.contract.limit), is shown with each over-claim.
    """
    unknown: dict[int, str] = {}
    for log in logs:
        unknown.update(log.unknown_keys)

    def shown(job: int) -> object:
        return keys.shown(job, unknown) if keys is not None else job

    reaped: dict[tuple[int, int], float] = {}
    for r in reaps or []:  # the first return of a claim is its release
        reaped.setdefault((r.job, r.attempt), r.at)
    span = max(last_id - first_id + 1, 0)
    counts = array("i", bytes(4 * span))
    unexpected: set[int] = set()
    finished = bytearray(span)  # one byte per seeded job: memory stays linear in the jobs
    finished_unexpected: set[int] = set()
    unmatched: set[int] = set()
    claims = stale = 0
    for log in logs:
        claims += len(log)
        stale += log.outcome.count(STALE)
        for job, how in zip(log.job, log.outcome):
            slot = job - first_id
            if 0 <= slot < span:
                counts[slot] += 1
                if how in _FINISHED:
                    finished[slot] = 1
            else:
                unexpected.add(job)
                if how in _FINISHED:
                    finished_unexpected.add(job)
        if not releases and (log.outcome.count(STALE) or log.outcome.count(ABANDONED)):
            unmatched.update(job for job, how in zip(log.job, log.outcome) if how in (STALE, ABANDONED))
    repeated = {first_id + slot for slot, n in enumerate(counts) if n > 1}
    reaped_jobs = {job for job, _ in reaped}
    unmatched = {job for job in unmatched
                 if not (finished[job - first_id] if 0 <= job - first_id < span else job in finished_unexpected)}
    history = _history(logs, repeated | reaped_jobs | unmatched)
    violations: list[Violation] = []
    doubled = redelivered = stale_violations = never_finished = 0
    for job in sorted(history):
        seen = sorted(history[job], key=lambda c: (c.attempt, c.claimed_at))
        kind, legit = _reclaims(job, seen, reaped)
        redelivered += legit
        if kind:
            doubled += 1
        late = _stale_change(job, seen, reaped)
        stale_violations += late
        # Finished by nobody and held by nobody: every claim's completion changed no row.
        lost = job in unmatched and not kind and not any(c.outcome in (LIVE, FAILED) for c in seen)
        never_finished += lost
        if (kind or late or lost) and len(violations) < MAX_EVIDENCE:
            violations.append(_evidence(job, kind or (ViolationKind.STALE_COMPLETION if late else ViolationKind.NEVER_FINISHED), seen,
                                        reaped, origin, shown(job)))
    never = counts.count(0)
    unique = span - never + len(unexpected)
    over_claims = [(log.worker, *o) for log in logs for o in log.over_claims]
    over_attempts = [(log.worker, *o) for log in logs for o in log.over_attempts]
    evidence = [{"kind": ViolationKind.OVER_CLAIM, "worker": w, "claimed_at_s": round(at - origin, 6), "rows": n, "limit": limit,
                 "jobs": [shown(j) for j in jobs]} for w, at, n, jobs in sorted(over_claims, key=lambda o: o[1])]
    evidence += [{"kind": "over-attempt", "worker": w, "job": shown(j), "attempt": a, "max_attempts": m}
                 for w, j, a, m in over_attempts]
    return Verdict(
        claims=claims, unique_jobs_claimed=unique, double_claimed_jobs=doubled, extra_claims=claims - unique,
        unclaimed_jobs=never if drained else 0, unreached_jobs=0 if drained else never,
        unexpected_jobs=len(unexpected), stale_completions=stale,
        violations=tuple(violations), drained=drained, redeliveries=redelivered,
        stale_completion_violations=stale_violations, jobs_finished=finished.count(1) + len(finished_unexpected),
        never_finished=never_finished, over_claims=len(over_claims), over_attempts=len(over_attempts),
        shape_evidence=tuple(evidence[:MAX_EVIDENCE]),
    )


def _history(logs: list[WorkerLog], jobs: set[int]) -> dict[int, list[_Seen]]:
    found: dict[int, list[_Seen]] = {}
    if not jobs:
        return found
    for log in logs:
        leases = {slot: (at, until) for slot, at, until in log.leases}
        backends = dict(log.backends)
        for i, job in enumerate(log.job):
            if job in jobs:
                server_at, until = leases.get(i, (math.nan, math.nan))
                found.setdefault(job, []).append(_Seen(log.worker, log.attempt[i], log.claimed_at[i],
                                                       log.ended_at[i], log.outcome[i], server_at, until,
                                                       backends.get(i)))
    return found


def _lease_ended(earlier: _Seen, later: _Seen) -> bool:
    """Had `earlier`'s lease ended, by the server's clock, when `later` was claimed? (NaN: no lease.)"""
    return earlier.lease_until <= later.server_at


def _released(job: int, earlier: _Seen, later: _Seen, reaped: dict[tuple[int, int], float]) -> bool:
    """Was `earlier` given back before `later` committed: returned by the reaper, or failed?"""
    at = reaped.get((job, earlier.attempt))
    if at is not None and at <= later.claimed_at:
        return True
    if _lease_ended(earlier, later):
        return True
    return earlier.outcome == FAILED and earlier.ended_at <= later.claimed_at


def _reclaims(job: int, seen: list[_Seen], reaped: dict[tuple[int, int], float]) -> tuple[ViolationKind | None, int]:
    """The kind of the first illegitimate re-claim (or None), and how many re-claims were legit."""
    kind, legit = None, 0
    held_for_good = False
    for i, later in enumerate(seen[1:], start=1):
        # An earlier claim nothing ever released holds the job for every later claim: once the kind
        # is known there is nothing left to count (this keeps a job claimed 10^5 times linear).
        earlier = seen[i - 1]
        held_for_good = held_for_good or ((job, earlier.attempt) not in reaped and earlier.outcome != FAILED)
        if held_for_good and kind is not None:
            break
        holders = [e for e in seen[:i] if not _released(job, e, later, reaped)]
        if not holders:
            legit += 1
            continue
        if kind is None:
            live = any(math.isnan(e.ended_at) or e.ended_at > later.claimed_at
                       or e.outcome not in (DONE, CLAIM_IS_COMPLETION) for e in holders)
            kind = ViolationKind.CONCURRENT if live else ViolationKind.AFTER_DONE
    return kind, legit


def _stale_change(job: int, seen: list[_Seen], reaped: dict[tuple[int, int], float]) -> int:
    """1 if a reaped claim's worker later changed the row (completed or failed it), or a claim whose
    lease ended and whose job was re-claimed changed it (its own requeue before the re-claim aside), else 0."""
    for claim in seen:
        if claim.outcome not in _CHANGED_ROW:
            continue
        at = reaped.get((job, claim.attempt))
        if at is not None and claim.ended_at > at:
            return 1
        # Only a claim that returned its lease can have outlived it: without one, no scan of the
        # later claims (a job claimed 10^5 times stays linear).
        if not math.isnan(claim.lease_until) and any(
                _lease_ended(claim, later) and not (claim.outcome == FAILED and claim.ended_at <= later.claimed_at)
                for later in seen if later is not claim and later.claimed_at >= claim.claimed_at):
            return 1
    return 0


def _evidence(job: int, kind: ViolationKind, seen: list[_Seen], reaped: dict[tuple[int, int], float], origin: float,
              key: object) -> Violation:
    """Job number `job`'s evidence, shown with its `key` (the reaper's returns are by number)."""

    def shown(t: float) -> float | None:
        return None if math.isnan(t) else round(t - origin, 6)

    return Violation(job=key, kind=kind, times_claimed=len(seen), claims=tuple(
        Claim(worker=c.worker, attempt=c.attempt, claimed_at_s=round(c.claimed_at - origin, 6),
              ended_at_s=shown(c.ended_at), outcome=OUTCOME_NAMES[c.outcome],
              reaped_at_s=shown(reaped[(job, c.attempt)]) if (job, c.attempt) in reaped else None,
              backend_pid=c.backend_pid)
        for c in seen[:MAX_CLAIMS_SHOWN]))
