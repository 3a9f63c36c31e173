"""`claimcheck bench`: claim strategies side by side on one server."""
from __future__ import annotations

import argparse
import dataclasses

from rich.console import Console

from pg_claimcheck.app.runs import run_all
from pg_claimcheck.commands import VERBS
from pg_claimcheck.commands._options import (
    add_producers_option,
    add_run_options,
    add_server_options,
    provide,
    rate_list,
    refuse_combined,
    report_runs,
    settings_grid,
    str_list,
)
from pg_claimcheck.commands.lib import run_libraries
from pg_claimcheck.contract.strategy import Strategy, load_strategy
from pg_claimcheck.engine.producer import check_feedable
from pg_claimcheck.errors import UsageError
from pg_claimcheck.libs import load_adapter, scoreboard
from pg_claimcheck.libs.parity import check_cycles
from pg_claimcheck.libs.runner import lib_settings
from pg_claimcheck.plans.shape import prepare_plan_table
from pg_claimcheck.probes.explain import PlanVerdict, plan_verdict
from pg_claimcheck.report.publish import print_conclusion
from pg_claimcheck.report.render import print_server, server_title
from pg_claimcheck.scenarios import CATALOG
from pg_claimcheck.server.provision import Server
from pg_claimcheck.server.session import run_schema
from pg_claimcheck.settings import RATE_BACKLOG_JOBS, above_zero, positive
from pg_claimcheck.verdict.knee import DEFAULT_LATENCY_SLO_MS, knees
from pg_claimcheck.verdict.result import RunResult
from pg_claimcheck.verdict.stats import median

BENCH_JOBS = 5_000
"""A bench run's jobs (as lib's): enough for a steady rate at 8 workers in a few seconds a strategy."""
MAX_REPEAT = 100
MAX_LATENCY_SLO_MS = 3_600_000.0  # an hour: the latency histograms' range
EVIDENCE_JOBS = 1  # per violating run: the table is the point, one story each is enough


def register(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser("bench", help=VERBS["bench"],
                         description="Run claim strategies (and queue libraries) side by side on one server and "
                                     "print what each costs. Writes a JSON and an HTML report to reports/ under the "
                                     "current directory (created if needed), or to --json PATH.")
    p.add_argument("--strategies", type=str_list,
                   help=f"built-in names or .sql files, comma-separated (default: the whole catalog, unless --libs: "
                        f"{', '.join(CATALOG)})")
    p.add_argument("--libs", type=str_list, default=[],
                   help="queue libraries to run through their own workers (see `claimcheck lib`), comma-separated; "
                        "`all`: every library installed here (those that are not are named and left out)")
    p.add_argument("--scoreboard", action="store_true",
                   help="with --libs: besides the healthy runs at each --workers, each fault kind alone and a run "
                        "fed at a rate, per library, and one row per library: each cell its verdict by the "
                        "library's own promise with one line of evidence (docs/libraries.md)")
    add_run_options(p, workers="8", jobs=BENCH_JOBS, modes="lease,lock", work_ms="1", faults=False, reports=True)
    # Unset means the verb's default: BENCH_JOBS, or RATE_BACKLOG_JOBS for a rate sweep (run()).
    p.set_defaults(jobs=None)
    next(a for a in p._actions if a.dest == "jobs").help = (
        f"jobs seeded per run (default {BENCH_JOBS:,}; {RATE_BACKLOG_JOBS} with --rate, whose producer feeds the rest)")
    p.add_argument("--repeat", type=int, default=1, metavar="N",
                   help="run every strategy x setting N times, back to back in rounds; the JSON keeps each "
                        "repetition, their median and spread, which `compare` tests for significance (5 or more "
                        "is enough for it; default 1)")
    p.add_argument("--pgbench", action="store_true",
                   help="also run each strategy's SQL through pgbench (same clients, server and table size) "
                        "and report our jobs/s over pgbench's; for --libs, one cycle of each library's worker "
                        "with the library's own statements")
    r = p.add_argument_group("rate sweep (open-loop producers: see docs/producers.md)")
    r.add_argument("--rate", type=rate_list, metavar="R[,R...]",
                   help="for each strategy and setting, a rate run per offered rate (jobs/s, comma-separated): a "
                        "producer enqueues at that rate for --duration seconds after the --jobs seeded ones (give a "
                        "small --jobs: a backlog delays every pickup), then the workers drain; prints each one's knee")
    add_producers_option(r)
    r.add_argument("--latency-slo", type=float, metavar="MS",
                   help="a rate is sustained only with pickup latency p99 at most this (default "
                        f"{DEFAULT_LATENCY_SLO_MS:g} ms; docs/producers.md defines sustained)")
    add_server_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, console: Console, err: Console) -> int:
    if args.jobs is None:
        args.jobs = BENCH_JOBS if args.rate is None else RATE_BACKLOG_JOBS
    positive("--repeat", args.repeat, maximum=MAX_REPEAT)
    if args.latency_slo is not None and args.rate is None:  # as RunSettings refuses --producers
        raise UsageError("--latency-slo needs --rate: it is the pickup latency a rate run must keep to be sustained")
    args.latency_slo = DEFAULT_LATENCY_SLO_MS if args.latency_slo is None else args.latency_slo
    above_zero("--latency-slo", args.latency_slo, MAX_LATENCY_SLO_MS)
    if args.rate is not None:
        refuse_combined("--rate sweeps the strategies' rate runs", (
            ("--libs (a library fed through its own enqueue API is `lib NAME --rate`)", args.libs),
            ("--pgbench (pgbench's parity runs are closed-loop)", args.pgbench),
            ("--repeat (a knee is read from one run per rate)", args.repeat > 1)))
    names = args.strategies if args.strategies is not None else ([] if args.libs else list(CATALOG))
    strategies = [load_strategy(name) for name in names]
    for strategy in strategies:  # before any server starts
        check_feedable(strategy, settings_grid(args)[0])
    if args.scoreboard and not args.libs:
        raise UsageError("--scoreboard is the libraries' table: give --libs (a comma list, or all)")
    adapters = scoreboard.installed_libraries(err) if args.libs == ["all"] else [load_adapter(n) for n in args.libs]
    distinct_names(list(zip(names, strategies)), [a.name for a in adapters])
    grid = settings_grid(args)
    # A library batches and leases its own way: one setting per worker count.
    lib_grid = [lib_settings(w, args.jobs, args.work_ms, duration_s=args.duration) for w in args.workers] if adapters else []
    with provide(args) as server:
        print_server(err, server)
        # `--libs all` and the scoreboard run pgbench for the libraries that have a cycle; a plain list
        # names only such libraries (check_cycles refuses one that has none)
        every = args.libs == ["all"] or args.scoreboard
        cycled = [a for a in adapters if a.has_pgbench_cycle() or not every] if args.pgbench else []
        if cycled:
            check_cycles(cycled, server.bin_dir, lib_grid)  # before the strategies' runs, not after them
        # Rounds, not N runs of one strategy in a row: drift on a busy machine spreads over all of them.
        results = []
        if strategies:
            rounds = []
            for round_no in range(args.repeat):
                if args.repeat > 1:
                    err.print(f"repetition {round_no + 1} of {args.repeat}")
                rounds.append(run_all(server, strategies, grid, err, pgbench=args.pgbench))
            results = [representative(reps) if len(reps) > 1 else reps[0] for reps in zip(*rounds)]
            err.print("planning each claim on a queue with history (the plan guard of `claimcheck explain`)")
            shapes = plan_shapes(server, strategies)
            results = [dataclasses.replace(r, plan=shapes.get(r.strategy.name)) for r in results]
        board = []
        if adapters and args.scoreboard:
            for plan in scoreboard.plans(adapters, lib_grid):
                board.append((plan, [run_libraries(server, [plan.adapter], [settings], err,
                                                   pgbench=plan.adapter in cycled and not settings.faults
                                                   and settings.rate_per_s is None)[0]
                                     for _, settings in plan.runs]))
                results += board[-1][1]
        elif adapters:
            results += run_libraries(server, cycled, lib_grid, err, pgbench=True) if cycled else []
            results += run_libraries(server, [a for a in adapters if a not in cycled], lib_grid, err)
        doc = report_runs(server, results, args, console, "bench",
                    f"claimcheck bench: {server_title(server)}",
                    always_write=True, evidence=EVIDENCE_JOBS,
                    knees=None if args.rate is None else knees(results, args.latency_slo),
                    scoreboard=scoreboard.as_dict(board) if board else None)
    if board:
        console.print(scoreboard.table(board))
        err.print("the scoreboard as Markdown (docs/libraries.md):\n" + scoreboard.markdown(board),
                  highlight=False, markup=False, soft_wrap=True)
    print_conclusion(console, doc)
    # A strategy believed unsafe showing its violation is the point of the table; a safe one
    # (or a user's file, which makes no claim) that violates is a finding.
    failed = [r for r in results if not r.exactly_once and r.strategy.expected != "unsafe"]
    return 1 if failed else 0


def distinct_names(strategies: list[tuple[str, Strategy]], libs: list[str]) -> None:
    """A row, its plan verdict and compare's key are a strategy's name: two strategies of one name
    (a/claim.sql and b/claim.sql, or one given twice) would share them, each shown with the other's
    plan. Refused before anything starts."""
    seen: dict[str, tuple[str, str]] = {}
    named = [(s.name, s.source, given) for given, s in strategies] + [(lib, lib, f"library {lib}") for lib in libs]
    for name, source, given in named:
        if name in seen:
            first, first_source = seen[name]
            same = "is given twice" if first_source == source else f"and {given} are both named {name!r}"
            raise UsageError(f"--strategies: {first} {same}; each strategy's rows, plan and compare key are "
                             "its name (a file's is its stem), so give each once and rename files that share a stem")
        seen[name] = (given, source)


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
