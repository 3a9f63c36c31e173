"""Databases of library runs (`claimcheck_<run id>`, see pg_claimcheck.libs.database): dropped by their
run, and swept by the next run of any verb once their owner is proven dead (a SIGKILLed `lib` run
cannot drop its own), as a run's schema is (pg_claimcheck.server.schema.sweep_leftovers).

The owner record is the database's comment, which CREATE DATABASE cannot write in its own transaction:
a run killed between the two left a database with no comment, which no run could ever prove abandoned
(seen in the signal fuzz). So a run first leaves a marker on this host's disk (`creating`, with its
owner record), and removes it once the comment is written; a database with no comment is swept when
its marker proves its owner dead.
"""
from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from psycopg import sql
from rich.console import Console

from pg_claimcheck.server.leftovers import temp_parents
from pg_claimcheck.server.ownership import abandoned, abandoned_dirs, left_by, listed, parse_comment, run_connections
from pg_claimcheck.server.postmaster import owned_dir
from pg_claimcheck.server.provision import Server
from pg_claimcheck.server.runcontext import SCHEMA_PREFIX, RunContext

DROP_LOCK_TIMEOUT = "10s"
CREATING_PREFIX = "claimcheck-db-"
"""The marker of a database being created: `claimcheck-db-<database>-*` in the temp directory."""


@contextmanager
def creating(name: str) -> Iterator[None]:
    """Around CREATE DATABASE `name` and its owner comment: a marker with this run's owner record."""
    marker = owned_dir(f"{CREATING_PREFIX}{name}-", Path(tempfile.gettempdir()), None)
    try:
        yield
    finally:
        shutil.rmtree(marker, ignore_errors=True)


def sweep_databases(conn: psycopg.Connection, server: Server, ours: str) -> list[str]:
    """Drop the databases of library runs whose owner is proven dead, as schemas are swept."""
    swept = []
    found = [(name, owner, None) for name, owner in abandoned(conn, "leftover_databases", ours)]
    for name, owner, marker in found + _uncommented(conn, ours):
        if drop_database(RunContext(server.dsn, name[len(SCHEMA_PREFIX):], server.topology), server.version_num):
            swept.append(f"swept database {name} {left_by(owner)}")
            if marker is not None:
                shutil.rmtree(marker, ignore_errors=True)
    return swept


def _uncommented(conn: psycopg.Connection, ours: str) -> list[tuple[str, dict, Path]]:
    """(name, owner, marker) of each database of ours with no owner comment whose marker on this host
    proves its owner dead, and of whose run no connection is left."""
    found = []
    for name, comment in listed(conn, "leftover_databases", ours):
        if parse_comment(comment) is not None:
            continue  # its comment decides (`abandoned`)
        for parent in temp_parents():
            for marker, owner in abandoned_dirs(parent, f"{CREATING_PREFIX}{name}-"):
                if not run_connections(conn, name):
                    found.append((name, owner, marker))
    return found


def drop_database(run: RunContext, version_num: int) -> bool:
    """Drop the run's database, closing what is still connected to it (workers we killed may
    leave backends behind for a moment). A failure only warns, with the command to finish by hand."""
    name = run.schema
    if not name.startswith(SCHEMA_PREFIX):  # a guard, not a feature: never drop anything else
        raise ValueError(f"refusing to drop database {name!r}")
    try:
        with run.connect("cleanup", in_schema=False) as conn:
            conn.execute(f"SET lock_timeout = '{DROP_LOCK_TIMEOUT}'")
            if version_num >= 130000:
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
            else:
                conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        return True
    except psycopg.Error as exc:
        Console(stderr=True).print(f"claimcheck: warning: could not drop database {name}: {str(exc).strip()}; "
                                   f"drop it by hand with DROP DATABASE {name} WITH (FORCE)", markup=False)
        return False
