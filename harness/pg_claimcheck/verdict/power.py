"""How hard a run looked: the power statement that goes with every verdict (docs/contracts.md).

A `held` is only as strong as the contention the run produced. A double claim of the narrow kind
needs two claims in flight at once, one of them taking its snapshot before the other commits: a
run whose claims never overlapped could not have shown it, however many jobs it ran. From the
workers' records (each claim's commit time and its statement's latency, so its interval in the
run's one clock) this module counts the claims that overlapped another worker's claim, and says in
plain words what the run's overlaps were worth, and what the run could not have seen at all.

Pure functions of plain data: the worker logs' columns, the sampler's wait counts, and a few facts
of the run (tested with hand-built records in tests/unit/test_power.py).
"""
from __future__ import annotations

import bisect
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pg_claimcheck.verdict.ledger import WorkerLog

ONE_IN = (100, 1000)
"""The race rates a `held` is stated against: a race showing in 1 of K overlapping claims."""
SESSION_LOCK = re.compile(r"pg_(try_)?advisory_lock(_shared)?\s*\(", re.I)
"""A session-level advisory lock in a statement (an `_xact_` lock ends with its transaction)."""
WEAK_FALL = 0.5
"""`compare` flags a run whose overlapping claims fell below this fraction of its base's."""


@dataclass(frozen=True)
class Power:
    """One run's power figures."""

    claims: int
    """Claim statements that returned jobs."""
    overlapping: int
    """Of them, those whose statement ran while another worker's claim statement ran."""
    lock_waits: int | None = None
    """Samples of a worker's backend waiting on a lock (the sampler's Lock/* wait events), or None
    where nothing was sampled. A skipped row (SKIP LOCKED, a try-lock that failed) is not observable."""
    unseen: tuple[str, ...] = ()
    """What the run could not have seen, in words, each with what would try it."""

    def chance(self, one_in: int) -> float:
        """The probability that a race showing in 1 of `one_in` overlapping claims (independently) shows
        at least once in this run."""
        return 1.0 - (1.0 - 1.0 / one_in) ** self.overlapping

    def statement(self) -> str:
        """The strength of a `held`, in words."""
        if not self.overlapping:
            return (f"no two of {self.claims:,} claims overlapped in time: a race between claims could not "
                    "have shown in this run")
        odds = ", ".join(f"1 of {k:,}: {_probability(self.chance(k))}" for k in ONE_IN)
        return (f"{self.overlapping:,} of {self.claims:,} claims overlapped another claim; a race that shows in "
                f"1 of K of them would have been seen with probability at least ({odds})")

    def as_dict(self) -> dict[str, object]:
        return {"claims": self.claims, "overlapping_claims": self.overlapping, "lock_waits": self.lock_waits,
                **{f"detect_1_in_{k}": round(self.chance(k), 4) for k in ONE_IN},
                "statement": self.statement(), "unseen": list(self.unseen)}


def _probability(p: float) -> str:
    """Two decimals, never a certainty the figure does not give: 0.9999 is "> 0.99", not "1.00"."""
    return "> 0.99" if p > 0.99 else f"{p:.2f}"


def claim_intervals(log: WorkerLog) -> list[tuple[float, float, int | None]]:
    """(start, commit, backend) of each of the worker's claims that returned jobs: a claim's rows share
    one commit time, and its statement's latency (one entry per such claim, in order) dates its start.
    The backend is the server's that ran it, where recorded (through a pooler), else None."""
    backends = dict(log.backends)
    commits: list[tuple[float, int | None]] = []
    for slot, at in enumerate(log.claimed_at):
        if not commits or at != commits[-1][0]:
            commits.append((at, backends.get(slot)))
    return [(at - latency / 1000.0, at, backend) for (at, backend), latency in zip(commits, log.claim_latency_ms, strict=False)]


def overlapping_claims(logs: list[WorkerLog]) -> tuple[int, int]:
    """(claims, those that overlapped another worker's claim in time). Two claims run by one server
    backend (a pooler's, which serves one transaction at a time) never overlapped, however their
    clients' clocks saw them. A worker's own claims follow one another: per other worker, only its
    claims started before this one ended and ending after it started can overlap it."""
    per_worker = [sorted(claim_intervals(log)) for log in logs]
    starts = [[start for start, _, _ in claims] for claims in per_worker]
    total = overlapped = 0
    for mine, claims in enumerate(per_worker):
        for start, end, backend in claims:
            total += 1
            if any(_overlaps(theirs, starts[other], start, end, backend)
                   for other, theirs in enumerate(per_worker) if other != mine):
                overlapped += 1
    return total, overlapped


def _overlaps(theirs: list[tuple[float, float, int | None]], starts: list[float], start: float, end: float, backend: int | None) -> bool:
    i = bisect.bisect_left(starts, end) - 1
    while i >= 0 and theirs[i][1] > start:
        if backend is None or theirs[i][2] != backend:
            return True
        i -= 1
    return False


def lock_waits(events: dict[str, int], samples: int) -> int | None:
    """Samples of a worker waiting on a lock, from the sampler's wait events (None: nothing sampled)."""
    if not samples:
        return None
    return sum(count for event, count in events.items() if event.startswith("Lock/"))


def unseen(*, overlapping: int, leased: bool, released: bool, session_locks: bool, fail_rate: float,
           retried: bool) -> tuple[str, ...]:
    """What a run could not have seen. `leased`: the claim sets a lease; `released`: some claim was
    released before it finished (reaped, expired, failed, a fault); `session_locks`: the claim takes
    a session advisory lock; `retried`: a failed job was claimed again."""
    out = []
    if leased and not released:
        out.append("no lease expired and nothing was reaped: a completion after its lease ended was never "
                   "tested (--faults stalls workers past their lease)")
    if session_locks and not overlapping:
        out.append("no session lock was ever contended: no two claims overlapped")
    if fail_rate > 0 and not retried:
        out.append("no retry came due: no failed job was claimed again (its backoff outlasted the run)")
    return tuple(out)


def weakened(base: dict[str, Any] | None, new: dict[str, Any] | None) -> bool:
    """Did a run's power fall by more than half against its base's (their JSON `power` objects)?"""
    if not base or not new:
        return False
    before, after = base.get("overlapping_claims") or 0, new.get("overlapping_claims") or 0
    return before > 0 and after < before * WEAK_FALL


def combined(powers: Iterable[Power | None]) -> Power | None:
    """A report's power: its runs' summed (a check's conditions are one look at the claim, many runs);
    None when no run has figures. What it did not see is what none of its runs saw: a lease that
    ended in lease-expiry's run was seen, though the run as seeded had none."""
    known = [p for p in powers if p is not None]
    if not known:
        return None
    waits = [p.lock_waits for p in known if p.lock_waits is not None]
    return Power(sum(p.claims for p in known), sum(p.overlapping for p in known), sum(waits) if waits else None,
                 tuple(line for line in known[0].unseen if all(line in p.unseen for p in known)))
