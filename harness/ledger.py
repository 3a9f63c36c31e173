"""Where double claims are counted: the exactly-once ledger, as pure functions of plain data.

Each worker records its committed claims locally (job id, attempt, when the claim committed,
when and how its ownership ended) and hands the log back at the end of the run; this module
judges the combined history by the rules in DESIGN.md:

- a claim counts only once its transaction committed (workers record nothing else);
- a second committed claim of a job whose earlier claim is still live, or which was already
  completed, is a violation: the job was handed to two workers;
- a seeded job never claimed by the end of a drain is `unclaimed`; a claimed id that was never
  seeded is `unexpected`. Both fail the run, like Jepsen's lost / unexpected.

Times are `time.monotonic()` readings, which Linux keeps system-wide, so the logs of different
worker processes share one clock.
"""
from __future__ import annotations

import math
from array import array
from dataclasses import dataclass, field

# How a claim's ownership ended.
LIVE = 0
"""Never ended: the run stopped while the worker held it."""
DONE = 1
"""The worker's completion changed the row."""
STALE = 2
"""The worker's completion changed no row: someone else owned the job by then."""
CLAIM_IS_COMPLETION = 3
"""The strategy has no `complete`: the claim statement itself finishes the job."""
OUTCOME_NAMES = {LIVE: "live", DONE: "done", STALE: "stale completion", CLAIM_IS_COMPLETION: "claim completes"}

MAX_EVIDENCE = 20  # violations kept with full evidence; the counts are always complete


@dataclass
class WorkerLog:
    """Everything one worker did, recorded locally and sent back once at the end."""

    worker: int
    job: array = field(default_factory=lambda: array("q"))
    attempt: array = field(default_factory=lambda: array("i"))
    claimed_at: array = field(default_factory=lambda: array("d"))
    ended_at: array = field(default_factory=lambda: array("d"))
    outcome: array = field(default_factory=lambda: array("b"))
    claim_latency_ms: array = field(default_factory=lambda: array("f"))
    """One entry per claim statement that returned jobs."""
    claim_statements: int = 0
    empty_claims: int = 0
    serialization_failures: int = 0
    deadlocks: int = 0
    started_at: float = 0.0
    finished_at: float = 0.0
    error: str | None = None

    def record(self, job: int, attempt: int, claimed_at: float, ended_at: float = math.nan,
               outcome: int = LIVE) -> int:
        self.job.append(job)
        self.attempt.append(attempt)
        self.claimed_at.append(claimed_at)
        self.ended_at.append(ended_at)
        self.outcome.append(outcome)
        return len(self.job) - 1

    def end(self, index: int, ended_at: float, outcome: int) -> None:
        self.ended_at[index] = ended_at
        self.outcome[index] = outcome

    def __len__(self) -> int:
        return len(self.job)


@dataclass(frozen=True)
class Claim:
    """One committed claim, as shown in evidence."""

    worker: int
    attempt: int
    claimed_at_s: float
    ended_at_s: float | None
    outcome: str


@dataclass(frozen=True)
class Violation:
    """A job handed to more than one worker, with every claim of it in commit order."""

    job: int
    kind: str
    """`concurrent`: claimed again while an earlier claim was live; `after-done`: claimed
    again after an earlier claim had completed it."""
    claims: tuple[Claim, ...]

    def as_dict(self) -> dict:
        return {"job": self.job, "kind": self.kind, "claims": [c.__dict__ for c in self.claims]}


@dataclass(frozen=True)
class Verdict:
    """The ledger's judgement of one run."""

    claims: int
    unique_jobs_claimed: int
    double_claimed_jobs: int
    extra_claims: int
    unclaimed_jobs: int
    unexpected_jobs: int
    stale_completions: int
    violations: tuple[Violation, ...]
    """At most MAX_EVIDENCE of them, lowest job ids first."""
    drained: bool

    @property
    def exactly_once(self) -> bool:
        lost = self.unclaimed_jobs if self.drained else 0
        return self.double_claimed_jobs == 0 and self.unexpected_jobs == 0 and lost == 0


def judge(logs: list[WorkerLog], first_id: int, last_id: int, *, drained: bool, origin: float = 0.0) -> Verdict:
    """Judge the combined logs of a run over seeded ids `first_id..last_id`.

    `drained` says the run went until no job was left, so unclaimed jobs are lost jobs.
    `origin` is the run's start, subtracted from times shown in evidence.
    Memory stays linear in the number of jobs (one counter per id), not per claim.
    """
    span = max(last_id - first_id + 1, 0)
    counts = array("i", bytes(4 * span))
    unexpected: set[int] = set()
    claims = stale = 0
    for log in logs:
        claims += len(log)
        stale += log.outcome.count(STALE)
        for job in log.job:
            slot = job - first_id
            if 0 <= slot < span:
                counts[slot] += 1
            else:
                unexpected.add(job)
    repeated = {first_id + slot for slot, n in enumerate(counts) if n > 1}
    never = counts.count(0)
    unique = span - never + len(unexpected)
    violations = _violations(logs, repeated, origin)
    return Verdict(
        claims=claims,
        unique_jobs_claimed=unique,
        double_claimed_jobs=len(repeated),
        extra_claims=claims - unique,
        unclaimed_jobs=never,
        unexpected_jobs=len(unexpected),
        stale_completions=stale,
        violations=tuple(violations[:MAX_EVIDENCE]),
        drained=drained,
    )


def _violations(logs: list[WorkerLog], repeated: set[int], origin: float) -> list[Violation]:
    """Evidence for the repeated jobs: every claim of each, in commit order."""
    by_job: dict[int, list[Claim]] = {}
    wanted = set(sorted(repeated)[:MAX_EVIDENCE])
    for log in logs:
        for i, job in enumerate(log.job):
            if job in wanted:
                ended = log.ended_at[i]
                by_job.setdefault(job, []).append(Claim(
                    worker=log.worker, attempt=log.attempt[i], claimed_at_s=round(log.claimed_at[i] - origin, 6),
                    ended_at_s=None if math.isnan(ended) else round(ended - origin, 6),
                    outcome=OUTCOME_NAMES[log.outcome[i]]))
    result = []
    for job in sorted(by_job):
        # Commit order: the attempt number is the server's own count of claims of the row; the
        # client-side time breaks ties (and orders claims of strategies that return no attempt).
        ordered = tuple(sorted(by_job[job], key=lambda c: (c.attempt, c.claimed_at_s)))
        result.append(Violation(job=job, kind=_kind(ordered), claims=ordered))
    return result


def _kind(claims: tuple[Claim, ...]) -> str:
    """`concurrent` if some claim committed before an earlier one had ended, else `after-done`."""
    held_until = -math.inf
    for claim in claims:
        if claim.claimed_at_s < held_until:
            return "concurrent"
        held_until = max(held_until, math.inf if claim.ended_at_s is None else claim.ended_at_s)
    return "after-done"
