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
from rich.table import Column

from claimcheck.engine.driver import run_strategy, seed
from claimcheck.verdict.result import RunResult
from claimcheck.errors import UsageError
from claimcheck.server import interrupts
from claimcheck.server.interrupts import shielded
from claimcheck.server.pooling import refuse_transaction_blocks
from claimcheck.server.provision import Server
from claimcheck.contract.queries import QUERIES
from claimcheck.server.redaction import scrub
from claimcheck.server.runcontext import RunContext
from claimcheck.engine.pgbench import pgbench_path, run_pgbench
from claimcheck.server.schema import create_schema, drop_schema, new_run_id, sweep_leftovers
from claimcheck.settings import RunSettings
from claimcheck.contract.strategy import Strategy

CLEANUP_LOCK_TIMEOUT = "10s"
RATE_WINDOW_S = 1.0
"""The progress line's "now" rate is over this trailing window: the average hides a stall."""
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
    run = RunContext(server.dsn, run_id or run_id_from_env())
    schema = run.schema
    created = False
    conn = run.connect("coordinator", in_schema=False)  # the schema does not exist yet
    try:
        for note in sweep_leftovers(conn, schema):
            Console(stderr=True).print(f"claimcheck: {note}", markup=False, highlight=False, soft_wrap=True)
        create_schema(conn, schema)
        created = True
        yield conn, run
    finally:
        with shielded():  # a second Ctrl-C must not leave the schema behind
            conn.close()
            if created:  # only what this run made: a schema it failed to create is another run's
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


def progress_bar(err: Console) -> Progress:
    """The live line of a run: label, bar, jobs done and the current rate, elapsed time. It fits 80
    columns: the description gives way (with an ellipsis) before the figures do."""
    return Progress(TextColumn("{task.description}", table_column=Column(no_wrap=True, overflow="ellipsis", ratio=2)),
                    BarColumn(bar_width=None, table_column=Column(ratio=1)),
                    TextColumn("{task.fields[status]}", table_column=Column(no_wrap=True)),
                    TimeElapsedColumn(), console=err, transient=True, auto_refresh=False, expand=True)


def progress_callback(progress: Progress, task, jobs: int):
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
                        status=f"{min(claims, jobs):,}/{jobs:,} jobs · {rate:,.0f}/s")
        progress.refresh()

    return show


def _client_cpu(result: RunResult) -> str:
    """What each job cost the client's CPU, ours against pgbench's: says whether a low ratio is our
    driver's cost (a 2-core machine gives the server what the clients do not take)."""
    workers, jobs = result.cpu_s.get("workers"), result.jobs_done
    if workers is None or not jobs or not result.pgbench.jobs_done:
        return ""
    return (f" (client CPU per job: {workers / jobs * 1e6:.0f} us, pgbench's "
            f"{result.pgbench.cpu_s / result.pgbench.jobs_done * 1e6:.0f} us)")


def run_all(server: Server, strategies: list[Strategy], grid: list[RunSettings], err: Console,
            pgbench: bool = False) -> list[RunResult]:
    """Every strategy x setting in one schema; with `pgbench`, each also through pgbench on a reseeded table."""
    if pgbench:
        pgbench_path(server.bin_dir)  # fail before the first run, not after it
        own = [s.source for s in strategies if s.own_schema]
        if own:
            raise UsageError(f"--pgbench runs the SQL on claimcheck's jobs table; {own[0]} brings its own tables")
    refuse_transaction_blocks(server.pooler, strategies, [settings.mode for settings in grid])  # before the schema
    results = []
    with run_schema(server) as (original, run):
        conn = original
        progress = progress_bar(err)
        with progress:
            runs = list(itertools.product(strategies, grid))
            for number, (strategy, settings) in enumerate(runs, start=1):
                # A sweep says where it is: "run 3 of 18" before the run's own progress.
                label = (f"run {number} of {len(runs)}: " if len(runs) > 1 else "") + \
                    f"{strategy.name} {settings.mode} {settings.workers}w"
                task = progress.add_task(label, total=settings.jobs, status="seeding")
                progress.refresh()

                show = progress_callback(progress, task, settings.jobs)
                conn = run.reconnected(conn)  # a restart fault may have closed it
                result = run_strategy(conn, server, run, strategy, settings, show)
                if pgbench:
                    progress.update(task, status="pgbench: reseeding and running the same SQL")
                    progress.refresh()
                    seed(conn, run, strategy, settings.jobs)  # the run's own key range, as its run
                    result = replace(result, pgbench=run_pgbench(conn, run, server.bin_dir, strategy, settings))
                progress.remove_task(task)
                status = "[green]exactly-once[/]" if result.exactly_once else "[red]violated[/]"
                parity = "" if result.pgbench is None else (
                    f" · pgbench {result.pgbench.jobs_per_s:,.0f} jobs/s, ratio {result.pgbench_ratio:.2f}"
                    + _client_cpu(result))
                err.print(f"  {label}: {result.jobs_done:,} done in {result.elapsed_s:.2f}s "
                          f"({result.throughput_jobs_per_s:,.0f} jobs/s){parity} {status}")
                results.append(result)
        if conn is not original:  # replaced after a restart fault; run_schema closes the original
            conn.close()
    return results


