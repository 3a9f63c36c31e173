"""What a claim's rows say: the jobs (as dense numbers) and attempts, and what else they prove.

A claim's first column is the job's key; its attempt number, `lease_until` and `max_attempts` are
found by name (see :class:`pg_claimcheck.contract.strategy.ClaimShape`). Reading the rows also notices what
the ledger judges beyond double claims: more rows than the claim asked for (an over-claim), an
attempt above the job's max_attempts, a key that was never seeded. The worker keeps these notes
only once the claim's transaction commits: a rolled-back claim is no claim and proves nothing.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from pg_claimcheck.contract.keys import KeySpace, canonical, number_of
from pg_claimcheck.contract.strategy import ClaimShape

MAX_OVER_CLAIM_KEYS = 20
"""Keys kept as evidence of one over-claim."""


@dataclass
class Notes:
    """What one claim's rows showed beyond (job, attempt)."""

    unknown_keys: dict[int, str] = field(default_factory=dict)
    over_attempts: list[Any] = field(default_factory=list)
    """(job, attempt, max_attempts)."""
    over_claims: list[Any] = field(default_factory=list)
    """(claimed_at, rows returned, job numbers)."""
    leases: list[Any] = field(default_factory=list)
    """lease_until (epoch seconds) per row, in row order, for claims that return it."""
    plain: bool = False
    """Read by the plain reading (`ClaimRows.plain`): every key and attempt was a number, no NULL."""


class ClaimRows:
    """Reads claims of one shape, numbering keys in one key space, against one limit (the claim's,
    see pg_claimcheck.contract.limit; None: it cannot be known, and no claim is an over-claim)."""

    def __init__(self, shape: ClaimShape, keys: KeySpace | None, limit: int | None, *, cut: bool = False) -> None:
        self.shape, self.keys = shape, keys
        self.limit = limit if limit is not None else math.inf
        self.cut = cut
        """The run ends at its first proven violation (pg_claimcheck.engine.watch): an over-claim's rows past
        those it asked for are not read. Its count alone proves it; a claim of a million rows was read,
        recorded, streamed and judged row by row after that: 2 min 51 s and 4.55 GB."""
        self.plain = (shape.key_is_int and (keys is None or keys.keys is None) and shape.attempt_index is not None
                      and shape.max_attempts_index is None and shape.lease_index is None)
        """The common claim: integer keys that are their own job numbers, an attempt column, nothing
        else to note. Its rows are read by `map` over C functions, with no Python bytecode per row:
        at 16 workers on 2 cores each worker resumes on a cold cache after every round trip, where
        the interpreter's work per job costs several times its instructions (see
        `pg_claimcheck.engine.fastpath.PreparedStatement.rowcount_each`)."""
        self._key, self._attempt = itemgetter(0), itemgetter(shape.attempt_index or 0)

    def read(self, rows: list[tuple[Any, ...]], started: float) -> tuple[list[tuple[int, int]], Notes]:
        """(job number, attempt) per row (an over-claim's first `limit` rows only, when `cut`), and the notes.
        Values may be psycopg's or libpq's text."""
        returned = len(rows)
        if self.plain and returned <= self.limit:
            try:
                jobs, attempts = list(map(int, map(self._key, rows))), map(int, map(self._attempt, rows))
                out = list(zip(jobs, attempts))
            except TypeError:  # a NULL key or attempt: the general reading below says what it means
                pass
            else:
                if not jobs or min(jobs) >= 0:  # a negative key is no seeded job: noted below
                    return out, Notes(plain=True)
        shape, keys, notes = self.shape, self.keys, Notes()
        at, most, lease = shape.attempt_index, shape.max_attempts_index, shape.lease_index
        if self.cut and returned > self.limit:
            rows = rows[:int(self.limit)]
        out = []
        for row in rows:
            if row[0] is None:
                raise ValueError("the claim returned a row whose first column, the job's key, is NULL: a claim must "
                                 "return the key of every job it took (see docs/contracts.md, section 1)")
            job = number_of(row[0], keys, shape.key_is_int)
            if job < 0:
                notes.unknown_keys[job] = str(canonical(row[0], shape.key_is_int))
            attempt = attempt_of(row, at)
            if most is not None and row[most] is not None and attempt > int(row[most]):
                notes.over_attempts.append((job, attempt, int(row[most])))
            if lease is not None:
                notes.leases.append(epoch(row[lease]))
            out.append((job, attempt))
        if returned > self.limit:
            notes.over_claims.append((started, returned, [job for job, _ in out[:MAX_OVER_CLAIM_KEYS]]))
        return out, notes


def attempt_of(row: tuple[Any, ...], index: int | None) -> int:
    """A row's attempt number: its column `index` (psycopg's value or libpq's text); 0 for none or NULL.
    How every claim-like row is read: the workers' claims, the reaper's and interleave's."""
    value = row[index] if index is not None else None
    return int(value) if value is not None else 0


def epoch(value: Any) -> float:
    """A server timestamp (datetime from psycopg) as seconds since the epoch; NaN when NULL."""
    if value is None:
        return math.nan
    return value.timestamp() if hasattr(value, "timestamp") else float(value)
