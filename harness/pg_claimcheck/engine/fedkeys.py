"""The jobs a rate run judges: the seeded keys and the keys its producers committed, nothing else.

The ledger counts jobs as numbers `first..last` (pg_claimcheck.contract.keys.KeySpace). A seeded run's
keys are known before the workers start; a rate run's produced keys are known only at its end, from
the producers' own reports (pg_claimcheck.engine.producer says why the report, not the table). When
seeded and committed keys together are one contiguous range of integers (one producer, or several
that all kept up) the workers' job numbers are already the ledger's, and only the range grows.
Otherwise (a producer fell behind and left gaps between the others' keys) the key space is built
from the keys themselves and each worker's job numbers are renumbered into it, after the run: a
reserved key no producer committed is then no job (neither lost nor unreached), and a claim of a
key outside the space is unexpected, as in any run.
"""
from __future__ import annotations

import dataclasses
from array import array

from pg_claimcheck.contract.keys import KeySpace, key_of
from pg_claimcheck.errors import ClaimcheckError
from pg_claimcheck.server.schema import SeededJobs
from pg_claimcheck.verdict.ledger import WorkerLog


def judged(seeded: SeededJobs, committed: list, logs: list[WorkerLog]) -> tuple[SeededJobs, list[WorkerLog]]:
    """The seeded jobs plus the committed keys (sorted canonical keys, none seeded), and the workers' logs
    numbered in that space."""
    key_is_int = seeded.keys is None or seeded.keys.key_is_int
    count = seeded.count + len(committed)
    if seeded.keys is None and key_is_int and (not committed or (
            committed[0] == seeded.last_id + 1 and committed[-1] - committed[0] + 1 == len(committed))):
        return dataclasses.replace(seeded, last_id=seeded.last_id + len(committed), count=count), logs
    before = seeded.keys
    base = before.keys if before is not None and before.keys is not None else range(seeded.first_id,
                                                                                      seeded.last_id + 1)
    space = KeySpace.of([*base, *committed], key_is_int)
    if space.duplicates:
        raise ClaimcheckError(f"{space.duplicates:,} produced key(s) were already seeded or produced twice: an "
                              "enqueue must create a new job each time; the run is not judged")
    renumbered = [_renumbered(log, before, space, key_is_int) for log in logs]
    return dataclasses.replace(seeded, first_id=space.first, last_id=space.last, count=count,
                               keys=space if space.keys is not None else None), renumbered


def _renumbered(log: WorkerLog, before: KeySpace | None, after: KeySpace, key_is_int: bool) -> WorkerLog:
    """A worker's log with each job number (of `before`, or an integer key as it is) moved to `after`'s."""
    unknown: dict[int, str] = {}

    def moved(job: int) -> int:
        key = key_of(before, job, log.unknown_keys, key_is_int)
        number = after.number(key)
        if number < 0:
            unknown[number] = str(key)
        return number

    return dataclasses.replace(
        log, job=array("q", map(moved, log.job)),
        over_claims=[(at, rows, [moved(j) for j in jobs]) for at, rows, jobs in log.over_claims],
        over_attempts=[(moved(j), a, m) for j, a, m in log.over_attempts], unknown_keys=unknown)
