"""`claimcheck bench`: claim strategies side by side on one server."""
from __future__ import annotations

import argparse
from functools import partial

from rich.console import Console

from pg_claimcheck.app.bench import bench
from pg_claimcheck.commands import VERBS
from pg_claimcheck.commands._options import (
    add_producers_option,
    add_run_options,
    add_server_options,
    asked_topology,
    provide,
    rate_list,
    refuse_combined,
    report_runs,
    settings_grid,
    str_list,
)
from pg_claimcheck.contract.strategy import Strategy, load_strategy
from pg_claimcheck.errors import UsageError
from pg_claimcheck.libs import load_adapter, scoreboard
from pg_claimcheck.libs.runner import lib_settings
from pg_claimcheck.report.progress import ProgressEvents
from pg_claimcheck.report.publish import print_conclusion
from pg_claimcheck.report.render import server_title
from pg_claimcheck.scenarios import CATALOG
from pg_claimcheck.settings import RATE_BACKLOG_JOBS, above_zero, positive
from pg_claimcheck.verdict.knee import DEFAULT_LATENCY_SLO_MS, knees

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
    grid = settings_grid(args)
    if args.scoreboard and not args.libs:
        raise UsageError("--scoreboard is the libraries' table: give --libs (a comma list, or all)")
    adapters = scoreboard.installed_libraries(err) if args.libs == ["all"] else [load_adapter(n) for n in args.libs]
    distinct_names(list(zip(names, strategies)), [a.name for a in adapters])
    # A library batches and leases its own way: one setting per worker count.
    lib_grid = [lib_settings(w, args.jobs, args.work_ms, duration_s=args.duration) for w in args.workers] if adapters else []
    ran = bench(partial(provide, args), strategies, grid, ProgressEvents(err), adapters=adapters, lib_grid=lib_grid,
                repeat=args.repeat, pgbench=args.pgbench, every_library=args.libs == ["all"],
                board=args.scoreboard, asked=asked_topology(args))
    results, board = ran.results, ran.board
    doc = report_runs(ran.server, results, args, console, "bench", f"claimcheck bench: {server_title(ran.server)}",
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
