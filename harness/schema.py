"""The run's schema and its seeded `jobs` table.

Every run works in its own schema `claimcheck_<run id>` and drops only that schema; nothing
outside it is created, altered or dropped. Names go through `psycopg.sql.Identifier`.
"""
from __future__ import annotations

import secrets
import time
from dataclasses import dataclass

import psycopg
from psycopg import sql

from claimcheck.queries import QUERIES

SCHEMA_PREFIX = "claimcheck_"


def new_run_id() -> str:
    return secrets.token_hex(4)


def schema_name(run_id: str) -> str:
    return f"{SCHEMA_PREFIX}{run_id}"


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
    conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    use_schema(conn, schema)


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
