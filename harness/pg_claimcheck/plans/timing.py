"""Timing conditions: the claim run again with the windows races live in held open (docs/plans.md).

A double claim of the narrow kind needs one worker's statement to take its snapshot before another
worker's commit (and the release of its lock), and to reach the job's row, or its lock, after it: a
session advisory lock taken on rows read from an older snapshot, a select-then-update, a lock taken
in the row path of a scan. On a quiet machine that window is a few microseconds and a run may never
land in it. A timing condition holds it open: in front of each table of the run's schema goes a view
of its name whose filter pauses the statement once, at the first row it reads (after its snapshot,
before it locks anything). The pause is a session setting of the workers only (`claimcheck.pause_us`,
carried like a planner condition's settings: pg_claimcheck.plans.conditions.under), so the
coordinator's statements never pause and the claim's text is the file's own.
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg import sql

from pg_claimcheck.contract.strategy import Strategy
from pg_claimcheck.plans import PLAN_QUERIES

PAUSE_SETTING = "claimcheck.pause_us"
MARKS_SETTING = "claimcheck.pause_on"
MARK_SEPARATOR = "\x1f"
MIN_MARK = 12
"""A shorter piece of a claim's text could be part of a completion's as well."""
_PARAMETER = re.compile(r"%\([^)]*\)s|%%|%s|%b|%t")
SHADOW_SUFFIX = "__claimcheck_base"


def claim_marks(strategy: Strategy) -> tuple[tuple[str, str], ...]:
    """The setting that tells the pause which statements are the claim's: for each statement of the
    pick and the claim, its longest piece of text between parameters, which reaches the server as
    written whatever the path (prepared with `$n`, or inline through a pooler). A statement with no
    piece long enough to tell it apart leaves the setting out: every statement then pauses."""
    marks = []
    for section in ("pick", "claim"):
        for step in strategy.steps(section) if strategy.has(section) else ():
            piece = max((p.strip() for p in _PARAMETER.split(step)), key=len)
            if len(piece) < MIN_MARK:
                return ()
            marks.append(piece)
    return ((MARKS_SETTING, MARK_SEPARATOR.join(marks)),) if marks else ()


def base_name(table: str) -> str:
    """The name a shadowed table takes while its view stands in front of it (within the 63 bytes of a name)."""
    return table[:63 - len(SHADOW_SUFFIX)] + SHADOW_SUFFIX


@contextmanager
def shadowed(conn: psycopg.Connection) -> Iterator[list[str]]:
    """Every table of the run's schema behind a pausing view for the block (conn in the run's
    schema, autocommit), then the tables back under their names, the views and function dropped;
    yields the tables shadowed. A table whose view cannot stand in front of it leaves the schema as
    it was and raises psycopg's error."""
    tables = [name for (name,) in conn.execute(PLAN_QUERIES["shadowed_tables"]).fetchall()]
    with conn.transaction():  # all or nothing: an error leaves the schema as it was
        conn.execute(PLAN_QUERIES["pause_function"])
        for table in tables:
            conn.execute(_shadow_sql("shadow_table", table))
    try:
        yield tables
    finally:
        if not conn.closed:
            with conn.transaction():
                for table in tables:
                    conn.execute(_shadow_sql("unshadow_table", table))
                conn.execute(PLAN_QUERIES["drop_pause_function"])


def _shadow_sql(query: str, table: str) -> sql.Composed:
    return sql.SQL(PLAN_QUERIES[query]).format(table=sql.Identifier(table), base=sql.Identifier(base_name(table)),
                                               name=sql.Identifier(table))
