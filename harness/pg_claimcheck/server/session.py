"""A run's schema on one server: a schema of our own, and dropped after (the runs in it:
pg_claimcheck.app.runs)."""
from __future__ import annotations

import os
import re
from contextlib import contextmanager
from typing import Iterator

import psycopg
from rich.console import Console

from pg_claimcheck.contract.queries import QUERIES
from pg_claimcheck.errors import UsageError
from pg_claimcheck.server import interrupts
from pg_claimcheck.server.databases import sweep_databases
from pg_claimcheck.server.interrupts import shielded
from pg_claimcheck.server.ownership import parse_comment, this_owner
from pg_claimcheck.server.provision import Server
from pg_claimcheck.server.redaction import scrub
from pg_claimcheck.server.runcontext import RunContext
from pg_claimcheck.server.schema import create_schema, drop_schema, new_run_id, sweep_leftovers

CLEANUP_LOCK_TIMEOUT = "10s"
RUN_ID_ENV = "CLAIMCHECK_RUN_ID"
"""Names the run's schema `claimcheck_<id>`, to find it in logs or in pg_stat_activity."""
_RUN_ID_RE = re.compile(r"^[a-z0-9_]{1,24}$")


def run_id_from_env() -> str:
    """$CLAIMCHECK_RUN_ID, checked, or a fresh random id."""
    run_id = os.environ.get(RUN_ID_ENV) or new_run_id()
    if not _RUN_ID_RE.match(run_id):
        raise UsageError(f"{RUN_ID_ENV}={run_id!r}: use 1 to 24 lowercase letters, digits or underscores")
    return run_id


@contextmanager
def run_schema(server: Server, run_id: str | None = None) -> Iterator[tuple[psycopg.Connection, RunContext]]:
    """A schema of our own for this invocation, and the coordinator's connection in it, with the run's
    context (which makes and names every other connection of the run); the schema is dropped (only
    it) however the block ends.

    `run_id` names it; by default $CLAIMCHECK_RUN_ID or a fresh random id. Callers that may run
    side by side under one environment (the pytest plugin under xdist) pass a fresh one.
    """
    run = RunContext(server.dsn, run_id or run_id_from_env(), server.topology)
    schema = run.schema
    created = False
    conn = run.connect("coordinator", in_schema=False)  # the schema does not exist yet
    try:
        for note in sweep_leftovers(conn, schema) + sweep_databases(conn, server, schema):
            Console(stderr=True).print(f"claimcheck: {note}", markup=False, highlight=False, soft_wrap=True)
        try:
            create_schema(conn, schema)
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM as it was made: the server may have committed it
            created = _made_by_this_process(run)
            raise
        created = True
        yield conn, run
    finally:
        with shielded():  # a second Ctrl-C must not leave the schema behind
            conn.close()
            if created:  # only what this run made: a schema it failed to create is another run's
                _drop_quietly(run)


def _made_by_this_process(run: RunContext) -> bool:
    """Does the run's schema exist with this process's owner record (an interrupt came as it was made,
    after the server committed it: the signal fuzz found one left by an interrupted `interleave`)?"""
    try:
        with run.connect("cleanup", in_schema=False) as conn:
            row = conn.execute(QUERIES["schema_comment"], {"schema": run.schema}).fetchone()
    except psycopg.Error:
        return False
    return row is not None and parse_comment(row[0]) == this_owner()


def drop_run_schema(dsn: str, run_id: str) -> None:
    """Drop the schema of a run another process of ours made and can no longer drop (a Locust master
    we killed on an interrupt): its connections ended first, as `run_schema` does on its way out."""
    run = RunContext(dsn, run_id)
    exists = True  # unless the server says otherwise: _drop_quietly says what went wrong
    try:
        with run.connect("cleanup", in_schema=False) as conn:
            exists = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (run.schema,)).fetchone() is not None
    except psycopg.Error:
        pass
    if exists:
        _drop_quietly(run)


def _drop_quietly(run: RunContext) -> None:
    """End the run's remaining connections (a statement still running after an interrupt), then
    drop its schema, on a fresh connection. A failure here must not hide the error that brought
    us here, so it only warns."""
    schema = run.schema
    try:
        with run.connect("cleanup", in_schema=False) as cleanup:
            cleanup.execute(QUERIES["terminate_run_backends"], {"app_pattern": run.app_pattern()})
            cleanup.execute(f"SET lock_timeout = '{CLEANUP_LOCK_TIMEOUT}'")
            drop_schema(cleanup, schema)
        interrupts.done(f"schema {schema} dropped")
    except psycopg.Error as exc:
        Console(stderr=True).print(f"claimcheck: warning: could not drop schema {schema}: {scrub(str(exc).strip())}; "
                                   f"drop it by hand with DROP SCHEMA {schema} CASCADE", markup=False, soft_wrap=True)
