"""Every strategy x setting of a verb in one schema of its own, with a progress bar: what `check`,
`bench` and `faults` run (docs/architecture.md, "One `check`").

Progress goes to the console given (stderr for the CLI).
"""
from __future__ import annotations

import itertools
import time
from collections import deque
from dataclasses import replace

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Column

from pg_claimcheck.contract.strategy import Strategy
from pg_claimcheck.engine.budget import Budget
from pg_claimcheck.engine.driver import run_strategy, seed
from pg_claimcheck.engine.pgbench import pgbench_path, run_pgbench
from pg_claimcheck.errors import UsageError
from pg_claimcheck.server.provision import Server
from pg_claimcheck.server.session import run_schema
from pg_claimcheck.server.topology import refuse_transaction_blocks
from pg_claimcheck.settings import RunSettings
from pg_claimcheck.verdict.liveness import HELD, NO_PROGRESS, VIOLATED
from pg_claimcheck.verdict.result import RunResult

RATE_WINDOW_S = 1.0
"""The progress line's "now" rate is over this trailing window: the average hides a stall."""


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
            pgbench: bool = False, budget: Budget | None = None) -> list[RunResult]:
    """Every strategy x setting in one schema; with `pgbench`, each also through pgbench on a reseeded table.
    With a `budget` (`check --plans none`), each run is sized by it and stops at its end."""
    if pgbench:
        pgbench_path(server.bin_dir)  # fail before the first run, not after it
        own = [s.source for s in strategies if s.own_schema]
        if own:
            raise UsageError(f"--pgbench runs the SQL on claimcheck's jobs table; {own[0]} brings its own tables")
    refuse_transaction_blocks(server.topology, strategies, [settings.mode for settings in grid])  # before the schema
    results = []
    with run_schema(server) as (original, run):
        conn = original
        progress = progress_bar(err)
        with progress:
            runs = list(itertools.product(strategies, grid))
            for number, (strategy, settings) in enumerate(runs, start=1):
                started = time.perf_counter()
                settings = budget.sized(settings) if budget else settings
                # A sweep says where it is: "run 3 of 18" before the run's own progress.
                label = (f"run {number} of {len(runs)}: " if len(runs) > 1 else "") + \
                    f"{strategy.name} {settings.mode} {settings.workers}w"
                task = progress.add_task(label, total=settings.jobs, status="seeding")
                progress.refresh()

                show = progress_callback(progress, task, settings.jobs)
                conn = run.reconnected(conn)  # a restart fault may have closed it
                result = run_strategy(conn, server, run, strategy, settings, show,
                                      deadline=budget and budget.final_deadline())
                if budget is not None:
                    budget.record(strategy.name, time.perf_counter() - started, result)
                if pgbench:
                    progress.update(task, status="pgbench: reseeding and running the same SQL")
                    progress.refresh()
                    seed(conn, run, strategy, settings.jobs)  # the run's own key range, as its run
                    result = replace(result, pgbench=run_pgbench(conn, run, server.bin_dir, strategy, settings))
                progress.remove_task(task)
                status = {HELD: "[green]exactly-once[/]", VIOLATED: "[red]violated[/]",
                          NO_PROGRESS: "[yellow]no progress[/]"}[result.outcome]
                parity = "" if result.pgbench is None else (
                    f" · pgbench {result.pgbench.jobs_per_s:,.0f} jobs/s, ratio {result.pgbench_ratio:.2f}"
                    + _client_cpu(result))
                err.print(f"  {label}: {result.jobs_done:,} done in {result.elapsed_s:.2f}s "
                          f"({result.throughput_jobs_per_s:,.0f} jobs/s){parity} {status}")
                results.append(result)
        if conn is not original:  # replaced after a restart fault; run_schema closes the original
            conn.close()
    return results


