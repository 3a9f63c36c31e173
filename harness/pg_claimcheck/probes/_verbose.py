"""Reading `VACUUM (VERBOSE)` output: the messages arrive as INFO notices, not as rows.

PostgreSQL 15-18 send one "finished vacuuming" message per relation (the table, then its TOAST
table) whose lines include::

    tuples: 2001 removed, 8542 remain, 0 are dead but not yet removable
    removable cutoff: 755, which was 0 XIDs old when operation ended

PostgreSQL 14 appends ", oldest xmin: N" to the tuples line and has no cutoff line; 13 and
older say "found R removable, K nonremovable row versions" with "D dead row versions cannot
be removed yet" in the detail. We read all three so a report from an older server still has
its figures, and say plainly when a message has none.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

_TUPLES_RE = re.compile(r"tuples:\s*(?P<removed>\d+) removed,\s*(?P<remain>\d+) remain,\s*"
                        r"(?P<dead>\d+) are dead but not yet removable")
_CUTOFF_RE = re.compile(r"removable cutoff:\s*\d+,\s*which was (?P<age>-?\d+) XIDs old")
_OLD_FOUND_RE = re.compile(r"found (?P<removed>\d+) removable, (?P<remain>\d+) nonremovable row versions")
_OLD_DEAD_RE = re.compile(r"(?P<dead>\d+) dead row versions cannot be removed yet")
# "finished vacuuming "db.schema.jobs"" (15+) or "vacuuming "schema.jobs"" / ""jobs": found" (<= 14)
_RELATION_RE = re.compile(r'"(?P<name>[^"]+)"')


@dataclass(frozen=True)
class VacuumFigures:
    """What one VACUUM (VERBOSE) said about one table."""

    removed: int
    """Dead row versions this VACUUM removed."""
    remain: int
    """Row versions left in the table (live and dead)."""
    dead_not_removable: int
    """Dead row versions a transaction still might see: kept until it ends."""
    cutoff_age_xids: int | None = None
    """How old the removable cutoff was (15+): the transactions the oldest holder spans."""

    def as_dict(self) -> dict:
        return {"removed": self.removed, "remain": self.remain, "dead_not_removable": self.dead_not_removable,
                "cutoff_age_xids": self.cutoff_age_xids}


def _names_table(message: str, table: str) -> bool:
    """True when the message's first quoted relation name is `table` (qualified or not)."""
    match = _RELATION_RE.search(message)
    return bool(match) and match.group("name").split(".")[-1] == table


def parse_vacuum_verbose(messages: Iterable[str], table: str = "jobs") -> VacuumFigures | None:
    """The figures for `table` from the INFO messages of one VACUUM (VERBOSE), or None.

    `messages` are the notices' primary text and detail, in arrival order; messages about
    other relations (the TOAST table, indexes) are skipped.
    """
    current_is_table = False
    old_found: re.Match | None = None
    for message in messages:
        if _RELATION_RE.search(message):
            current_is_table = _names_table(message, table)
        if not current_is_table:
            continue
        tuples = _TUPLES_RE.search(message)
        if tuples:
            cutoff = _CUTOFF_RE.search(message)
            return VacuumFigures(int(tuples["removed"]), int(tuples["remain"]), int(tuples["dead"]),
                                 int(cutoff["age"]) if cutoff else None)
        old_found = _OLD_FOUND_RE.search(message) or old_found
        old_dead = _OLD_DEAD_RE.search(message)
        if old_found and old_dead:
            return VacuumFigures(int(old_found["removed"]), int(old_found["remain"]), int(old_dead["dead"]))
    return None
