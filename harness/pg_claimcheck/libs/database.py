"""A database of the run's own for a library run: `claimcheck_<run id>`, created and dropped by us.

Queue libraries install fixed table names (`procrastinate_jobs`, `pgqueuer`, ...) and functions
in the connection's schema, so a schema of ours is not enough to keep two runs (or a user's own
installation) apart: each library run gets a fresh database on the server, and only that
database is dropped afterwards, however the run ends. On a server we start this is free; on a
server given with --dsn the role needs CREATEDB.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import psycopg
from psycopg import sql
from rich.console import Console

from pg_claimcheck.errors import ServerError, UsageError
from pg_claimcheck.server import interrupts
from pg_claimcheck.server.databases import creating, drop_database, sweep_databases
from pg_claimcheck.server.ownership import schema_comment
from pg_claimcheck.server.provision import Server
from pg_claimcheck.server.redaction import redact_dsn
from pg_claimcheck.server.runcontext import RunContext


def _may_create(conn: psycopg.Connection) -> bool:
    row = conn.execute("SELECT rolcreatedb OR rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()
    return bool(row and row[0])


@contextmanager
def run_database(server: Server, run_id: str, library: str) -> Iterator[RunContext]:
    """Create `claimcheck_<run_id>`, yield the run's context in it (its DSN names that database, so
    every connection the run makes goes there), drop it (only it) however the block ends."""
    run = RunContext(server.dsn, run_id, server.topology)
    name = run.schema  # the run's name for what it owns: its schema elsewhere, its database here
    with run.connect("coordinator", in_schema=False) as conn:
        if not _may_create(conn):
            user = conn.info.user
            raise ServerError(
                f"claimcheck lib {library} runs in a database of its own ({name}), because {library} installs "
                f"fixed table names that must not meet another installation; the role {user!r} on "
                f"{redact_dsn(server.dsn)} may not create databases. Grant it (ALTER ROLE {user} CREATEDB), "
                "or leave out --dsn to use the embedded server.")
        for left in sweep_databases(conn, server, name):
            Console(stderr=True).print(f"claimcheck: {left}", markup=False, highlight=False, soft_wrap=True)
        # The owner record, as a run's schema has (see pg_claimcheck.server.schema): a SIGKILLed run's
        # database is swept by the next run. CREATE DATABASE cannot share a transaction with the comment
        # that holds it: until the comment is written, a marker on this host's disk holds it.
        with creating(name):
            try:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            except psycopg.errors.DuplicateDatabase:
                raise UsageError(f"database {name} already exists; another run uses this run id. Choose another "
                                 "CLAIMCHECK_RUN_ID, or unset it for a fresh one; claimcheck leaves that database "
                                 "alone") from None
            conn.execute(sql.SQL("COMMENT ON DATABASE {} IS {}").format(sql.Identifier(name),
                                                                         sql.Literal(schema_comment())))
    try:
        yield RunContext(psycopg.conninfo.make_conninfo(server.dsn, dbname=name), run_id, server.topology)
    finally:
        with interrupts.shielded():  # a second Ctrl-C must not leave the database behind
            if drop_database(run, server.version_num):
                interrupts.done(f"database {name} dropped")
