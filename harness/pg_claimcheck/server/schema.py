"""The run's schema and its seeded `jobs` table.

Every run works in its own schema `claimcheck_<run id>` and drops only that schema; nothing
outside it is created, altered or dropped. Names go through `psycopg.sql.Identifier`.
"""
from __future__ import annotations

import hashlib
import itertools
import secrets
import time
from typing import Callable

import psycopg
from psycopg import errors, sql
from psycopg.types.string import TextLoader

from pg_claimcheck.contract.keys import KeySpace
from pg_claimcheck.contract.queries import QUERIES
from pg_claimcheck.contract.strategy import INT_TYPES, server_message
from pg_claimcheck.errors import SqlFileError, UsageError
from pg_claimcheck.server.ownership import abandoned, left_by, parse_comment, schema_comment
from pg_claimcheck.server.runcontext import (
    SCHEMA_PREFIX,
    failing_statement,
    in_one_transaction,
    refuses_blocks,
    schema_name,
    use_schema,
)
from pg_claimcheck.verdict.observed import SeededJobs

__all__ = ["SCHEMA_PREFIX", "schema_name"]

KEY_RANGE_BITS = 30
"""Each run's integer keys start at its own multiple of 2**30: up to ~1e9 jobs per run, and runs
sharing a server never share a key (advisory locks are database-wide, schemas do not separate them)."""


def job_words(key: object, first_id: int) -> str:
    """How evidence names a job: `job 7` for the 7th key of a run's own range (%(key_base)s + 6, a
    64-bit number nobody reads: the built-in table's ids, or a seed written from key_base), else the key
    as the claim returned it (a user's own ids, a uuid, a text)."""
    base = first_id - 1
    if isinstance(key, int) and base > 0 and base % (1 << KEY_RANGE_BITS) == 0 and 0 < key - base < 1 << KEY_RANGE_BITS:
        return f"job {key - base}"
    return f"job {key}"


def numbering_note(first_id: int) -> str:
    """Where evidence numbers jobs within the run's key range (job_words), which id job 1 is."""
    return "" if job_words(first_id, first_id) != "job 1" else f"; job 1 is the run's first key, id {first_id}"


def new_run_id() -> str:
    return secrets.token_hex(4)


def key_base(run_id: str) -> int:
    """The first integer key of a run: distinct for distinct run ids (a generated id is 32 random bits,
    so its range is disjoint from every other run's; a chosen id is hashed to 32 bits)."""
    try:
        slot = int(run_id, 16) if len(run_id) <= 8 else None
    except ValueError:
        slot = None
    if slot is None:
        slot = int.from_bytes(hashlib.blake2b(run_id.encode(), digest_size=4).digest(), "big")
    return (slot << KEY_RANGE_BITS) + 1


def owned_schema_sql(schema: str) -> list[sql.Composed]:
    """CREATE SCHEMA with its owner record: a schema of ours never exists without one (a sweep
    leaves a schema with no owner record alone for ever)."""
    name = sql.Identifier(schema)
    return [sql.SQL("CREATE SCHEMA {}").format(name),
            sql.SQL("COMMENT ON SCHEMA {} IS {}").format(name, sql.Literal(schema_comment()))]


def create_schema(conn: psycopg.Connection, schema: str) -> None:
    """Create the run's schema with its owner record (see pg_claimcheck.server.ownership) in one transaction,
    so it never exists without one. A schema of that name already there is another run's: refused,
    never dropped (a reused CLAIMCHECK_RUN_ID must not destroy the run that holds it)."""
    try:
        in_one_transaction(conn, [(statement, None) for statement in owned_schema_sql(schema)])
    except errors.DuplicateSchema:
        owner = parse_comment(conn.execute(QUERIES["schema_comment"], {"schema": schema}).fetchone()[0])
        whose = (f"run by process {owner.get('pid')} on {owner.get('host')}" if owner else "not made by this version")
        raise UsageError(f"schema {schema} already exists ({whose}); another run uses this run id. Choose another "
                         f"CLAIMCHECK_RUN_ID, or unset it for a fresh one; claimcheck leaves that schema alone") from None
    use_schema(conn, schema)


def sweep_leftovers(conn: psycopg.Connection, ours: str) -> list[str]:
    """Drop schemas of claimcheck runs whose owner is proven dead (see pg_claimcheck.server.ownership);
    return what was swept, and why a dead owner's schema was left (its run's connections remain). A schema without an owner record, of another host or of a live run stays."""
    swept: list[str] = []
    held: list[str] = []
    for name, owner in abandoned(conn, "leftover_schemas", ours, held):
        try:
            drop_schema(conn, name)
        except psycopg.Error:  # another role's, or locked: not ours to force
            continue
        swept.append(f"swept schema {name} {left_by(owner)}")
    return swept + held


def drop_schema(conn: psycopg.Connection, schema: str) -> None:
    if not schema.startswith(SCHEMA_PREFIX):  # a guard, not a feature: never drop anything else
        raise ValueError(f"refusing to drop schema {schema!r}")
    conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def reset_schema(conn: psycopg.Connection, schema: str) -> None:
    """Empty the run's schema (drop it and make it again, with its owner record): a file's `schema`
    section can then run again, for a run on tables built another way (see pg_claimcheck.plans)."""
    drop_schema(conn, schema)
    create_schema(conn, schema)


def build_jobs_table(conn: psycopg.Connection, schema: str, jobs: int, first_key: int = 1,
                     while_seeding: Callable[[], None] | None = None) -> SeededJobs:
    """(Re)create `schema.jobs` with `jobs` queued jobs, ids from `first_key`; the previous table, if any, goes.

    `while_seeding` runs while the seed's transaction is still open, after its rows are in (see
    pg_claimcheck.plans.conditions: statistics taken then see none of them); the table is then made
    and committed first, and not analyzed after.
    """
    started = time.perf_counter()
    in_one_transaction(conn, [
        (sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(schema, "jobs")), None),
        (sql.SQL(QUERIES["create_jobs"]).format(first_key=sql.Literal(first_key)), None),
        *([] if while_seeding else [(QUERIES["seed_jobs"], {"jobs": jobs})]),
        (QUERIES["add_primary_key"], None), (QUERIES["create_ready_index"], None)])
    if while_seeding is None:
        conn.execute(QUERIES["analyze_jobs"])
    else:
        with conn.transaction():
            conn.execute(QUERIES["seed_jobs"], {"jobs": jobs})
            while_seeding()
    first, last, count = conn.execute(QUERIES["seeded_range"]).fetchone()
    return SeededJobs(first_id=first or 0, last_id=last or 0, count=count, seconds=time.perf_counter() - started)


def _check_seeded(strategy, jobs: int, rows: int, distinct: int) -> None:
    """The contract's seed: %(jobs)s jobs, its last statement returning their keys, one row per job.
    Fewer rows would judge a smaller run than asked for; a key returned twice is not two jobs."""
    if rows != jobs:
        raise SqlFileError(f"{strategy.where('seed')}: section 'seed' returned {rows:,} rows for --jobs {jobs:,}; "
                           "it must create %(jobs)s jobs and return their keys, one row per job")
    if distinct != rows:
        raise SqlFileError(f"{strategy.where('seed')}: section 'seed' returned {rows - distinct:,} duplicate keys "
                           f"among its {rows:,} rows; it must return each created job's own key, one row per job")


def build_own_tables(conn: psycopg.Connection, schema: str, strategy, jobs: int, first_key: int,
                     while_seeding: Callable[[], None] | None = None) -> SeededJobs:
    """Run a file's `schema` section, then its `seed`, whose last statement returns the seeded keys.

    Runs in `schema` (the search_path), in one transaction: a failure leaves nothing half-built.
    `schema` statements are bound on the client (DDL takes no server-side parameters). With
    `while_seeding` (as in build_jobs_table), `schema` is committed first and the hook runs before
    the seed commits.
    """
    started = time.perf_counter()
    values = {"jobs": jobs, "key_base": first_key}
    section, step = "schema", 0

    def schema_section() -> None:
        nonlocal step
        client = psycopg.ClientCursor(conn)
        for step, (statement, names) in enumerate(strategy.bound_steps["schema"]):
            client.execute(statement, {k: values[k] for k in names})

    if refuses_blocks(conn) and while_seeding is None:
        space = _own_tables_in_one_message(conn, strategy, values)
        distinct = space.last - space.first + 1
        _check_seeded(strategy, jobs, distinct + space.duplicates, distinct)
        return SeededJobs(first_id=space.first, last_id=space.last, count=distinct,
                          seconds=time.perf_counter() - started, keys=space if space.keys is not None else None)
    try:
        if while_seeding is not None:  # committed first: the hook's own connection must see the tables
            with conn.transaction():
                schema_section()
        with conn.transaction():
            if while_seeding is None:
                schema_section()
            section = "seed"
            cur = conn.cursor()
            cur.adapters.register_loader("uuid", TextLoader)  # keys as text, no UUID object per row
            *before, (last, last_names) = strategy.bound_steps["seed"]
            for step, (statement, names) in enumerate(before):
                cur.execute(statement, {k: values[k] for k in names})
            step = len(before)
            # Streamed row by row: a million keys never sit in one result next to their copies.
            rows = cur.stream(last, {k: values[k] for k in last_names})
            try:
                first = next(rows, None)
            except psycopg.ProgrammingError as exc:
                # The server's own error (an undefined column is one too), or psycopg's refusal of the
                # statement's text: reported below. Only "the operation in stream() didn't produce a
                # result" means the statement ran and returned nothing.
                if exc.sqlstate or "produce a result" not in str(exc):
                    raise
                first = None
            if not cur.description:
                raise SqlFileError(f"{strategy.source}: section 'seed' returns no rows: its last statement ran but "
                                   "returned nothing. The contract needs the seed's last statement to return the key "
                                   "of each job it created, one row per job (INSERT ... RETURNING id); see "
                                   "docs/contracts.md, section 1. Nothing was run.")
            key_is_int = cur.description[0].type_code in INT_TYPES
            space = KeySpace.collect(itertools.chain([first] if first is not None else [], rows), key_is_int)
            if while_seeding is not None:
                while_seeding()
    except psycopg.Error as exc:
        raise SqlFileError(server_message(strategy, section, step, exc)) from None
    distinct = space.last - space.first + 1
    _check_seeded(strategy, jobs, distinct + space.duplicates, distinct)
    return SeededJobs(first_id=space.first, last_id=space.last, count=space.last - space.first + 1,
                      seconds=time.perf_counter() - started, keys=space if space.keys is not None else None)


def _own_tables_in_one_message(conn: psycopg.Connection, strategy, values: dict) -> KeySpace:
    """build_own_tables behind statement pooling, where no BEGIN of ours reaches the server: the `schema`
    and `seed` statements in one message, bound on the client, which the server runs as one implicit
    transaction (a failure leaves nothing); the keys are its last statement's rows, read whole. A
    failure is placed on its statement by pg_claimcheck.server.runcontext.failing_statement."""
    steps = [(section, step, statement, names) for section in ("schema", "seed")
             for step, (statement, names) in enumerate(strategy.bound_steps[section])]
    client = conn.cursor()
    bound = [client.mogrify(statement, {k: values[k] for k in names}) for *_, statement, names in steps]
    try:
        cur = in_one_transaction(conn, [(statement, None) for statement in bound])
        rows = cur.fetchall() if cur.description else None
    except psycopg.Error as exc:
        section, step, *_ = steps[failing_statement(conn, bound)]
        raise SqlFileError(server_message(strategy, section, step, exc)) from None
    if rows is None:
        raise SqlFileError(f"{strategy.source}: section 'seed' returns no rows: its last statement ran but "
                           "returned nothing. The contract needs the seed's last statement to return the key "
                           "of each job it created, one row per job (INSERT ... RETURNING id); see "
                           "docs/contracts.md, section 1. Nothing was run.")
    key_is_int = cur.description[0].type_code in INT_TYPES
    return KeySpace.collect(rows, key_is_int)
