"""A session of runs on one server: a schema of our own, the runs, and the schema dropped after.

Used by the CLI and by tests; progress goes to the console given (stderr for the CLI).
"""
from __future__ import annotations

import itertools
import os
import re
from collections import deque
from contextlib import contextmanager
from dataclasses import replace
from typing import Iterator

import psycopg
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from claimcheck.driver import coordinator_connection, run_strategy
from claimcheck.result import RunResult
from claimcheck.errors import UsageError
from claimcheck.provision import Server
from claimcheck.pgbench import pgbench_path, run_pgbench
from claimcheck.schema import build_jobs_table, create_schema, drop_schema, new_run_id, schema_name
from claimcheck.settings import RunSettings
from claimcheck.strategy import Strategy

CLEANUP_LOCK_TIMEOUT = "10s"
RATE_WINDOW_S = 1.0
"""The progress line's "now" rate is over this trailing window: the average hides a stall."""
RUN_ID_ENV = "CLAIMCHECK_RUN_ID"
"""Names the run's schema `claimcheck_<id>`, to find it in logs or in pg_stat_activity."""
_RUN_ID_RE = re.compile(r"^[a-z0-9_]{1,24}$")


def _run_id() -> str:
    run_id = os.environ.get(RUN_ID_ENV) or new_run_id()
    if not _RUN_ID_RE.match(run_id):
        raise UsageError(f"{RUN_ID_ENV}={run_id!r}: use 1 to 24 lowercase letters, digits or underscores")
    return run_id


@contextmanager
def run_schema(server: Server, run_id: str | None = None) -> Iterator[tuple[psycopg.Connection, str, str]]:
    """A schema of our own for this invocation; dropped (only it) however the block ends.

    `run_id` names it; by default $CLAIMCHECK_RUN_ID or a fresh random id. Callers that may run
    side by side under one environment (the pytest plugin under xdist) pass a fresh one.
    """
    run_id = run_id or _run_id()
    schema = schema_name(run_id)
    conn = coordinator_connection(server.dsn, run_id)
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
        return coordinator_connection(server.dsn, run_id, schema)


def _progress_callback(progress: Progress, task, jobs: int):
    """Show jobs drained (claims, capped at the seeded count), the current rate and, via the
    elapsed column, the time: what someone watching a long run needs to see it is still moving."""
    window: deque[tuple[float, int]] = deque()

    def show(claims: int, elapsed: float) -> None:
        window.append((elapsed, claims))
        while len(window) > 2 and elapsed - window[0][0] > RATE_WINDOW_S:
            window.popleft()
        then, before = window[0]
        rate = (claims - before) / (elapsed - then) if elapsed > then else 0.0
        progress.update(task, completed=min(claims, jobs),
                        status=f"{min(claims, jobs):,}/{jobs:,} jobs drained · {rate:,.0f} jobs/s now")
        progress.refresh()

    return show


def run_all(server: Server, strategies: list[Strategy], grid: list[RunSettings], err: Console,
            pgbench: bool = False) -> list[RunResult]:
    """Every strategy x setting in one schema; with `pgbench`, each also through pgbench on a reseeded table."""
    if pgbench:
        pgbench_path(server.bin_dir)  # fail before the first run, not after it
        own = [s.source for s in strategies if s.own_schema]
        if own:
            raise UsageError(f"--pgbench runs the SQL on claimcheck's jobs table; {own[0]} brings its own tables")
    results = []
    with run_schema(server) as (original, schema, run_id):
        conn = original
        progress = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[status]}"),
                            TimeElapsedColumn(), console=err, transient=True, auto_refresh=False)
        with progress:
            for strategy, settings in itertools.product(strategies, grid):
                label = f"{strategy.name} · {settings.mode} · {settings.workers}w"
                task = progress.add_task(label, total=settings.jobs, status="seeding")
                progress.refresh()

                show = _progress_callback(progress, task, settings.jobs)
                conn = _alive(conn, server, schema, run_id)
                result = run_strategy(conn, server, schema, run_id, strategy, settings, show)
                if pgbench:
                    progress.update(task, status="pgbench: reseeding and running the same SQL")
                    progress.refresh()
                    build_jobs_table(conn, schema, settings.jobs)
                    result = replace(result, pgbench=run_pgbench(conn, server.dsn, server.bin_dir, schema, run_id,
                                                                 strategy, settings))
                progress.remove_task(task)
                status = "[green]exactly-once[/]" if result.exactly_once else "[red]violated[/]"
                parity = "" if result.pgbench is None else (
                    f" · pgbench {result.pgbench.jobs_per_s:,.0f} jobs/s, ratio {result.pgbench_ratio:.2f}")
                err.print(f"  {label}: {result.table.done:,} done in {result.elapsed_s:.2f}s "
                          f"({result.throughput_jobs_per_s:,.0f} jobs/s){parity} {status}")
                results.append(result)
        if conn is not original:  # replaced after a restart fault; run_schema closes the original
            conn.close()
    return results


