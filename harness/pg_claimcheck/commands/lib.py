"""`claimcheck lib NAME`: a real queue library's own workers, judged by the ledger.

The library is installed as its users install it (`pip install 'pg-claimcheck[NAME]'`), its schema
is created by its own installer, jobs are enqueued through its public API and N processes run
its own worker loop with a task that records each execution. See `pg_claimcheck.libs`.
"""
from __future__ import annotations

import argparse
from functools import partial

from rich.console import Console

from pg_claimcheck.app.lib import lib
from pg_claimcheck.commands import VERBS
from pg_claimcheck.commands._options import (
    add_json_option,
    add_server_options,
    add_wide_option,
    int_list,
    provide,
    report_runs,
)
from pg_claimcheck.commands.idle import DEFAULT_SUSPEND_AFTER_S, run_idle
from pg_claimcheck.errors import UsageError
from pg_claimcheck.libs import ADAPTERS, load_adapter
from pg_claimcheck.libs.runner import FAULT_WORK_MS, LIB_JOBS, LIB_WORK_MS, lib_settings
from pg_claimcheck.report.progress import ProgressEvents
from pg_claimcheck.report.publish import print_conclusion
from pg_claimcheck.report.render import print_producer, server_title
from pg_claimcheck.settings import RATE_BACKLOG_JOBS
from pg_claimcheck.verdict.result import RunResult

EVIDENCE_JOBS = 5


def register(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser("lib", help=VERBS["lib"])
    p.add_argument("library", help=f"one of: {', '.join(ADAPTERS)}")
    add_lib_options(p, workers="8", jobs=LIB_JOBS)
    p.add_argument("--faults", action="store_true",
                   help="SIGKILL workers mid-task, terminate worker backends, stall workers past the library's "
                        "heartbeat or lease, restart a server we started; and say what became of each job")
    p.add_argument("--rate", type=float,
                   help="open loop: enqueue this many jobs per second through the library's own enqueue API for "
                        "--duration seconds while its workers run (after the --jobs enqueued first), then drain "
                        "(procrastinate, pgqueuer, saq, huey, chancy, dbos; see docs/producers.md)")
    p.add_argument("--idle", type=float, metavar="WINDOW",
                   help="instead of a run: the library's own worker, at its documented defaults, on its empty queue "
                        "for WINDOW seconds, sampled as a serverless compute's monitor samples (docs/idle.md)")
    p.add_argument("--suspend-after", type=float, default=DEFAULT_SUSPEND_AFTER_S, metavar="SECONDS",
                   help=f"with --idle: the compute's suspend-after-idle threshold (default {DEFAULT_SUSPEND_AFTER_S:g})")
    p.add_argument("--idle-setting", choices=("defaults", "suspendable"), default="defaults",
                   help="with --idle: the library's documented defaults, or the settings under which, by its source, "
                        "it would let a compute suspend (docs/idle.md)")
    add_pgbench_option(p)
    add_server_options(p)
    p.set_defaults(func=run)


def add_lib_options(p: argparse.ArgumentParser, *, workers: str, jobs: int) -> None:
    g = p.add_argument_group("load")
    g.add_argument("--workers", type=int_list, default=int_list(workers),
                   help=f"worker processes, or a comma list to sweep (default {workers})")
    g.add_argument("--jobs", type=int, default=None,
                   help=f"jobs enqueued per run (default {jobs:,}; {RATE_BACKLOG_JOBS} with --rate, whose producer "
                        "enqueues the rest)")
    p.set_defaults(default_jobs=jobs)
    g.add_argument("--work-ms", help=f"work per execution: 5, 1-10 or exp:5 (default {LIB_WORK_MS}; "
                                     f"{FAULT_WORK_MS} with --faults)")
    g.add_argument("--duration", type=float, help="stop after this many seconds even if jobs remain")
    add_json_option(g)
    add_wide_option(g)


def add_pgbench_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pgbench", action="store_true",
                   help="also run one cycle of the library's worker, with the library's own statements, through "
                        "pgbench (as many clients as workers, the same jobs freshly enqueued) and report the "
                        "library's jobs/s over pgbench's")



def print_library_notes(console: Console, results: list[RunResult]) -> None:
    """What the library's own table left unfinished, in its words, and why workers exited."""
    for result in results:
        lib = result.library or {}
        for job in lib.get("unfinished", []):
            console.print(f"{lib['name']} ({result.settings.workers}w): job {job['job']} (its id {job['library_id']}) "
                          f"left {job['status']!r} after {job['attempts']} attempt(s), owner {job['owner']}",
                          highlight=False, markup=False)
        if lib.get("workers_replaced"):
            console.print(f"{lib['name']} ({result.settings.workers}w): {lib['workers_replaced']} worker(s) exited "
                          f"and were replaced; last words: {'; '.join(sorted(set(lib['worker_errors'])))}",
                          highlight=False, markup=False)


def run(args: argparse.Namespace, console: Console, err: Console) -> int:
    if args.jobs is None:
        args.jobs = args.default_jobs if args.rate is None else RATE_BACKLOG_JOBS
    if args.idle is not None:
        return run_idle(args, console, err)
    adapter = load_adapter(args.library)
    if args.rate is not None and (not adapter.feeds or args.pgbench):
        raise UsageError(f"claimcheck lib {adapter.name} --rate: " + (
            "it does not combine with --pgbench (whose pass enqueues --jobs afresh)" if adapter.feeds else
            f"feeding {adapter.name} while it works is not implemented; "
            "run it without --rate"))
    grid = [lib_settings(w, args.jobs, args.work_ms, args.faults, args.duration, args.rate) for w in args.workers]
    ran = lib(partial(provide, args), adapter, grid, ProgressEvents(err), pgbench=args.pgbench)
    results = ran.results
    doc = report_runs(ran.server, results, args, console, "lib",
                      f"claimcheck lib {adapter.name} {adapter.version()}: {server_title(ran.server)}",
                      always_write=False, evidence=EVIDENCE_JOBS)
    print_library_notes(console, results)
    for result in results:
        print_producer(console, result)
    print_conclusion(console, doc)
    held = all(r.exactly_once for r in results)
    console.print(f"promise ({adapter.docs}): {adapter.promise}", highlight=False, markup=False)
    for result in results:  # at-most-once: what it lost is reported, and held to its word (judge.held_to_promise)
        if result.verdict.lost_as_promised:
            console.print(f"{adapter.name} ({result.settings.workers}w): {result.verdict.lost_as_promised} job(s) lost "
                          f"to the faults, which its {adapter.delivery} promise allows", highlight=False, markup=False)
    console.print("[bold green]the library kept its promise[/]" if held else "[bold red]the library broke its promise[/]")
    return 0 if held else 1
