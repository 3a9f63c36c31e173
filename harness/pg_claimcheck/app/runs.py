"""Every strategy x setting of a verb in one schema of its own: the runs of `check` (without planner
conditions), `bench` and `faults` (docs/architecture.md, "One `check`"); `faults` is :func:`sweep`.

What they do as they go is said through the events given (pg_claimcheck.app.events).
"""
from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from functools import partial

import psycopg

from pg_claimcheck.app.events import RunEvents
from pg_claimcheck.app.preflight import preflight, preflight_on
from pg_claimcheck.contract.strategy import Strategy
from pg_claimcheck.engine.budget import Budget
from pg_claimcheck.engine.driver import run_strategy, seed
from pg_claimcheck.engine.pgbench import pgbench_path, run_pgbench
from pg_claimcheck.errors import UsageError
from pg_claimcheck.plans.conditions import AS_SEEDED, build_tables
from pg_claimcheck.server.provision import Server
from pg_claimcheck.server.runcontext import RunContext
from pg_claimcheck.server.session import run_schema
from pg_claimcheck.server.topology import DIRECT, Topology
from pg_claimcheck.settings import RunSettings
from pg_claimcheck.verdict.result import RunResult


@dataclass(frozen=True)
class Ran:
    """What a verb ran: on which server, and every run in the order made."""

    server: Server
    results: list[RunResult]


def sweep(provide: Callable[[], AbstractContextManager[Server]], strategies: list[Strategy], grid: list[RunSettings],
          events: RunEvents, *, asked: Topology = DIRECT) -> Ran:
    """Every strategy x setting of `grid` on the server `provide` gives, after the preflight (before the
    server starts, with the topology `asked`, and again if it brought a pooler the options did not say)."""
    preflight(strategies, grid, asked)
    with provide() as server:
        events.server_ready(server)
        preflight_on(server, strategies, grid)
        return Ran(server, run_all(server, strategies, grid, events))


def run_all(server: Server, strategies: list[Strategy], grid: list[RunSettings], events: RunEvents,
            pgbench: bool = False, budget: Budget | None = None, run_id: str | None = None) -> list[RunResult]:
    """Every strategy x setting in one schema; with `pgbench`, each also through pgbench on a reseeded table.
    With a `budget` (`check --plans none`), each run is sized by it and stops at its end. The caller
    has run the preflight (pg_claimcheck.app.preflight)."""
    if pgbench:
        pgbench_path(server.bin_dir)  # fail before the first run, not after it
        own = [s.source for s in strategies if s.own_schema]
        if own:
            raise UsageError(f"--pgbench runs the SQL on claimcheck's jobs table; {own[0]} brings its own tables")
    results = []
    with run_schema(server, run_id) as (original, run):
        conn = original
        runs = list(itertools.product(strategies, grid))
        with events.sweeping():
            for number, (strategy, settings) in enumerate(runs, start=1):
                # A sweep says where it is: "run 3 of 18" before the run's own progress.
                label = (f"run {number} of {len(runs)}: " if len(runs) > 1 else "") + \
                    f"{strategy.name} {settings.mode} {settings.workers}w"
                # The sizing runs (engine.budget); a budget has no faults, so conn is still open.
                caught = budget and budget.measure(settings, partial(_sizing_run, conn, server, run, strategy))
                if caught:  # a sizing run violated exactly-once: it stands for the run (engine.budget)
                    events.run_finished(label, caught)
                    results.append(caught)
                    continue
                started = time.perf_counter()
                settings = budget.sized(settings) if budget else settings
                with events.running(label, settings, "seeding"):
                    conn = run.reconnected(conn)  # a restart fault may have closed it
                    seeded = build_tables(conn, run, strategy, AS_SEEDED, settings.jobs) if budget else None
                    result = run_strategy(conn, server, run, strategy, settings, events.progress, seeded=seeded,
                                          deadline=budget and budget.final_deadline())
                    if budget is not None:
                        budget.record(strategy.name, time.perf_counter() - started, result)
                    if pgbench:
                        events.run_status("pgbench: reseeding and running the same SQL")
                        seed(conn, run, strategy, settings.jobs)  # the run's own key range, as its run
                        result = replace(result, pgbench=run_pgbench(conn, run, server.bin_dir, strategy, settings))
                    events.run_finished(label, result)  # under its live line, as before
                results.append(result)
        if conn is not original:  # replaced after a restart fault; run_schema closes the original
            conn.close()
    return results


def _sizing_run(conn: psycopg.Connection, server: Server, run: RunContext, strategy: Strategy,
                settings: RunSettings) -> RunResult:
    """A budget's sizing run (pg_claimcheck.engine.budget) on tables built anew: a file's own tables are
    dropped first, as its schema section creates them once (so is the run's after it)."""
    return run_strategy(conn, server, run, strategy, settings,
                        seeded=build_tables(conn, run, strategy, AS_SEEDED, settings.jobs))
