"""A session of runs on one server: a schema of our own, the runs, and the schema dropped after.

Used by the CLI and by tests; progress goes to the console given (stderr for the CLI).
"""
from __future__ import annotations

import itertools
import os
import re
from contextlib import contextmanager
from typing import Iterator

import psycopg
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from harness.driver import RunResult, reconnect, run_strategy
from harness.errors import UsageError
from harness.provision import Server
from harness.schema import create_schema, drop_schema, new_run_id, schema_name
from harness.settings import RunSettings
from harness.strategy import Strategy

CLEANUP_LOCK_TIMEOUT = "10s"
RUN_ID_ENV = "CLAIMCHECK_RUN_ID"
"""Names the run's schema `claimcheck_<id>`, to find it in logs or in pg_stat_activity."""
_RUN_ID_RE = re.compile(r"^[a-z0-9_]{1,24}$")


def _run_id() -> str:
    run_id = os.environ.get(RUN_ID_ENV) or new_run_id()
    if not _RUN_ID_RE.match(run_id):
        raise UsageError(f"{RUN_ID_ENV}={run_id!r}: use 1 to 24 lowercase letters, digits or underscores")
    return run_id


@contextmanager
def run_schema(server: Server) -> Iterator[tuple[psycopg.Connection, str, str]]:
    """A schema of our own for this invocation; dropped (only it) however the block ends."""
    run_id = _run_id()
    schema = schema_name(run_id)
    conn = psycopg.connect(server.dsn, autocommit=True, application_name=f"claimcheck/{run_id}/coordinator")
    try:
        create_schema(conn, schema)
        yield conn, schema, run_id
    finally:
        conn.close()
        _drop_quietly(server.dsn, schema)


def _drop_quietly(dsn: str, schema: str) -> None:
    """Drop the run's schema on a fresh connection (the coordinator's may be mid-query after an
    interrupt). A failure here must not hide the error that brought us here, so it only warns."""
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as cleanup:
            cleanup.execute(f"SET lock_timeout = '{CLEANUP_LOCK_TIMEOUT}'")
            drop_schema(cleanup, schema)
    except psycopg.Error as exc:
        Console(stderr=True).print(f"claimcheck: warning: could not drop schema {schema}: {str(exc).strip()}; "
                                   f"drop it by hand with DROP SCHEMA {schema} CASCADE", markup=False)


def _alive(conn: psycopg.Connection, server: Server, schema: str, run_id: str) -> psycopg.Connection:
    """The coordinator's connection, or a new one if a restart fault closed it."""
    try:
        conn.execute("SELECT 1")
        return conn
    except psycopg.OperationalError:
        conn.close()
        return reconnect(server.dsn, schema, run_id)


def run_all(server: Server, strategies: list[Strategy], grid: list[RunSettings], err: Console) -> list[RunResult]:
    results = []
    with run_schema(server) as (conn, schema, run_id):
        progress = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[status]}"),
                            TimeElapsedColumn(), console=err, transient=True, auto_refresh=False)
        with progress:
            for strategy, settings in itertools.product(strategies, grid):
                label = f"{strategy.name} · {settings.mode} · {settings.workers}w"
                task = progress.add_task(label, total=settings.jobs, status="seeding")
                progress.refresh()

                def show(claims: int, elapsed: float, task=task) -> None:
                    rate = claims / elapsed if elapsed > 0 else 0.0
                    progress.update(task, completed=min(claims, settings.jobs),
                                    status=f"{claims:,} claims · {rate:,.0f}/s")
                    progress.refresh()

                conn = _alive(conn, server, schema, run_id)
                result = run_strategy(conn, server, schema, run_id, strategy, settings, show)
                progress.remove_task(task)
                status = "[green]exactly-once[/]" if result.exactly_once else "[red]violated[/]"
                err.print(f"  {label}: {result.table.done:,} done in {result.elapsed_s:.2f}s "
                          f"({result.throughput_jobs_per_s:,.0f} jobs/s) {status}")
                results.append(result)
    return results


