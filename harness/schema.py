"""The run's schema and its seeded `jobs` table.

Every run works in its own schema `claimcheck_<run id>` and drops only that schema; nothing
outside it is created, altered or dropped. Names go through `psycopg.sql.Identifier`.
"""
from __future__ import annotations

import secrets
import time
from dataclasses import dataclass

import psycopg
from psycopg import errors, sql

from claimcheck.errors import UsageError
from claimcheck.ownership import owner_dead, parse_comment, schema_comment
from claimcheck.queries import QUERIES
from claimcheck.runcontext import SCHEMA_PREFIX, app_pattern, schema_name

__all__ = ["SCHEMA_PREFIX", "schema_name"]


def new_run_id() -> str:
    return secrets.token_hex(4)


@dataclass(frozen=True)
class SeededJobs:
    """What seeding produced: ids `first_id..last_id`, every one of them a job."""

    first_id: int
    last_id: int
    count: int
    seconds: float
    """Wall time of the whole table build: create, seed, index, analyze."""


def use_schema(conn: psycopg.Connection, schema: str) -> None:
    conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))


def create_schema(conn: psycopg.Connection, schema: str) -> None:
    """Create the run's schema with its owner record (see claimcheck.ownership) in one transaction,
    so it never exists without one. A schema of that name already there is another run's: refused,
    never dropped (a reused CLAIMCHECK_RUN_ID must not destroy the run that holds it)."""
    try:
        with conn.transaction():
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
            conn.execute(sql.SQL("COMMENT ON SCHEMA {} IS {}").format(sql.Identifier(schema),
                                                                   sql.Literal(schema_comment())))
    except errors.DuplicateSchema:
        owner = parse_comment(conn.execute("SELECT obj_description(%s::regnamespace, 'pg_namespace')",
                                           (schema,)).fetchone()[0])
        whose = (f"run by process {owner.get('pid')} on {owner.get('host')}" if owner else "not made by this version")
        raise UsageError(f"schema {schema} already exists ({whose}); another run uses this run id. Choose another "
                         f"CLAIMCHECK_RUN_ID, or unset it for a fresh one; claimcheck leaves that schema alone") from None
    use_schema(conn, schema)


def sweep_leftovers(conn: psycopg.Connection, ours: str) -> list[str]:
    """Drop schemas of claimcheck runs whose owner is proven dead (see claimcheck.ownership);
    return what was swept. A schema without an owner record, of another host or of a live run stays."""
    swept = []
    rows = conn.execute(QUERIES["leftover_schemas"],
                        {"pattern": SCHEMA_PREFIX.replace("_", r"\_") + "%", "ours": ours}).fetchall()
    for name, comment in rows:
        owner = parse_comment(comment)
        if owner is None or not owner_dead(owner):
            continue
        if conn.execute(QUERIES["run_backends"], {"app_pattern": app_pattern(name[len(SCHEMA_PREFIX):])}).fetchone():
            continue  # a connection of that run is still open: not proven dead
        try:
            drop_schema(conn, name)
        except psycopg.Error:  # another role's, or locked: not ours to force
            continue
        swept.append(f"swept schema {name} left by process {owner['pid']} on this host, which no longer runs")
    return swept


def drop_schema(conn: psycopg.Connection, schema: str) -> None:
    if not schema.startswith(SCHEMA_PREFIX):  # a guard, not a feature: never drop anything else
        raise ValueError(f"refusing to drop schema {schema!r}")
    conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def build_jobs_table(conn: psycopg.Connection, schema: str, jobs: int) -> SeededJobs:
    """(Re)create `schema.jobs` with `jobs` queued jobs; the previous table, if any, goes."""
    started = time.perf_counter()
    with conn.transaction():
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(schema, "jobs")))
        conn.execute(QUERIES["create_jobs"])
        conn.execute(QUERIES["seed_jobs"], {"jobs": jobs})
        conn.execute(QUERIES["add_primary_key"])
        conn.execute(QUERIES["create_ready_index"])
    conn.execute(QUERIES["analyze_jobs"])
    first, last, count = conn.execute(QUERIES["seeded_range"]).fetchone()
    return SeededJobs(first_id=first or 0, last_id=last or 0, count=count, seconds=time.perf_counter() - started)
