"""`bench`: claim strategies (and queue libraries through their own workers) side by side on one
server, from provisioning to the judged runs and each strategy's plan verdict. The CLI's `bench`
calls :func:`bench`, and prints the table, the knees and the scoreboard from what it returns.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

from pg_claimcheck.app.events import RunEvents
from pg_claimcheck.app.lib import run_libraries
from pg_claimcheck.app.preflight import preflight, preflight_libraries, preflight_on
from pg_claimcheck.app.runs import run_all
from pg_claimcheck.contract.strategy import Strategy
from pg_claimcheck.libs import scoreboard
from pg_claimcheck.libs._adapter import LibraryAdapter
from pg_claimcheck.libs.parity import check_cycles
from pg_claimcheck.plans.shape import prepare_plan_table
from pg_claimcheck.probes.explain import PlanVerdict, plan_verdict
from pg_claimcheck.server.provision import Server
from pg_claimcheck.server.session import run_schema
from pg_claimcheck.server.topology import DIRECT, Topology
from pg_claimcheck.settings import RunSettings
from pg_claimcheck.verdict.result import RunResult
from pg_claimcheck.verdict.stats import median


@dataclass(frozen=True)
class Benched:
    """What a bench ran: on which server, every run (the strategies' first, each standing for its
    repetitions, then the libraries'), and with a scoreboard each library's plan and its runs."""

    server: Server
    results: list[RunResult]
    board: list[tuple[scoreboard.Plan, list[RunResult]]] = field(default_factory=list)


def bench(provide: Callable[[], AbstractContextManager[Server]], strategies: list[Strategy],
          grid: list[RunSettings], events: RunEvents, *, adapters: list[LibraryAdapter] | None = None,
          lib_grid: list[RunSettings] | None = None, repeat: int = 1, pgbench: bool = False,
          every_library: bool = False, board: bool = False, asked: Topology = DIRECT) -> Benched:
    """Every strategy x setting of `grid` in rounds of `repeat`, then each library in `adapters` at each
    setting of `lib_grid` (with `board`, the scoreboard's runs: each fault kind alone and a fed run too).
    With `pgbench`, each also through pgbench: the strategies' SQL, and the libraries' worker cycle (of
    those that have one when `every_library` or `board` asks for all of them; else every library named
    must have one)."""
    adapters, lib_grid = adapters or [], lib_grid or []
    preflight(strategies, grid, asked)  # before any server starts
    with provide() as server:
        events.server_ready(server)
        preflight_on(server, strategies, grid)
        preflight_libraries(server, adapters)
        every = every_library or board
        cycled = [a for a in adapters if a.has_pgbench_cycle() or not every] if pgbench else []
        if cycled:
            check_cycles(cycled, server.bin_dir, lib_grid)  # before the strategies' runs, not after them
        # Rounds, not N runs of one strategy in a row: drift on a busy machine spreads over all of them.
        results: list[RunResult] = []
        if strategies:
            rounds = []
            for round_no in range(repeat):
                if repeat > 1:
                    events.note(f"repetition {round_no + 1} of {repeat}")
                rounds.append(run_all(server, strategies, grid, events, pgbench=pgbench))
            results = [representative(reps) if len(reps) > 1 else reps[0] for reps in zip(*rounds, strict=True)]
            events.note("planning each claim on a queue with history (the plan guard of `claimcheck explain`)")
            shapes = plan_shapes(server, strategies)
            results = [dataclasses.replace(r, plan=shapes.get(r.strategy.name)) for r in results]
        runs: list[tuple[scoreboard.Plan, list[RunResult]]] = []
        if adapters and board:
            for plan in scoreboard.plans(adapters, lib_grid):
                runs.append((plan, [run_libraries(server, [plan.adapter], [settings], events,
                                                  pgbench=plan.adapter in cycled and not settings.faults
                                                  and settings.rate_per_s is None)[0]
                                    for _, settings in plan.runs]))
                results += runs[-1][1]
        elif adapters:
            results += run_libraries(server, cycled, lib_grid, events, pgbench=True) if cycled else []
            results += run_libraries(server, [a for a in adapters if a not in cycled], lib_grid, events)
        return Benched(server, results, runs)


def representative(reps: tuple[RunResult, ...]) -> RunResult:
    """The repetition that stands for all of them: the first that violated exactly-once (its evidence is
    what matters), else the one nearest the median throughput; it carries every repetition."""
    violated = [r for r in reps if not r.exactly_once]
    if violated:
        chosen = violated[0]
    else:
        mid = median([r.throughput_jobs_per_s for r in reps])
        chosen = min(reps, key=lambda r: abs(r.throughput_jobs_per_s - mid))
    return dataclasses.replace(chosen, repetitions=tuple(reps))


def plan_shapes(server: Server, strategies: list[Strategy]) -> dict[str, PlanVerdict]:
    """Each strategy's plan on a table of finished jobs and a few ready ones, judged by the guard."""
    with run_schema(server) as (conn, run):
        prepare_plan_table(conn, run.schema)
        # The guard plans against claimcheck's jobs table: a file with its own tables is not planned.
        return {s.name: plan_verdict(conn, s) for s in strategies if not s.own_schema}
