"""`claimcheck faults`: the built-ins' lifecycle under injected faults, lock vs lease, with a
fault-free baseline of the same load, so what a crash costs in each mode is a figure."""
from __future__ import annotations

import argparse
import dataclasses
from functools import partial

from rich.console import Console
from rich.table import Table

from pg_claimcheck.app.runs import sweep
from pg_claimcheck.commands import VERBS
from pg_claimcheck.commands._options import (
    add_run_options,
    add_server_options,
    asked_topology,
    provide,
    report_runs,
    settings_grid,
    str_list,
)
from pg_claimcheck.contract.strategy import load_strategy
from pg_claimcheck.engine.faults import recovery_s
from pg_claimcheck.report.progress import ProgressEvents
from pg_claimcheck.report.render import server_title
from pg_claimcheck.settings import FaultPlan

DEFAULT_STRATEGIES = ("skip-locked",)
EVIDENCE_JOBS = 3


def register(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser("faults", help=VERBS["faults"])
    p.add_argument("--strategies", type=str_list, default=list(DEFAULT_STRATEGIES),
                   help="built-in names or .sql files, comma-separated (default: skip-locked alone, in lease and "
                        "lock mode)")
    g = p.add_argument_group("faults injected into each run (spread over the run by progress)")
    g.add_argument("--kills", type=int, default=FaultPlan.kills, metavar="N",
                   help=f"SIGKILL a worker process mid-job; a replacement starts (default {FaultPlan.kills})")
    g.add_argument("--terminates", type=int, default=FaultPlan.terminates, metavar="N",
                   help="pg_terminate_backend a worker's backend inside a transaction; the worker reconnects "
                        f"(default {FaultPlan.terminates})")
    g.add_argument("--stalls", type=int, default=FaultPlan.stalls, metavar="N",
                   help=f"make a worker sleep {FaultPlan.stall_factor:g} leases after a claim, then try to complete "
                        f"(default {FaultPlan.stalls})")
    g.add_argument("--restarts", type=int, default=FaultPlan.restarts, metavar="N",
                   help="restart the server mid-run; only a server claimcheck started, so not with --dsn "
                        f"(default {FaultPlan.restarts})")
    add_run_options(p, workers="16", jobs=20_000, modes="lease,lock", work_ms="0", faults=True, reports=True)
    p.set_defaults(fail_rate=0.05, backoff_unit=0.05)
    add_server_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, console: Console, err: Console) -> int:
    strategies = [load_strategy(name) for name in args.strategies]
    plan = FaultPlan(kills=args.kills, terminates=args.terminates, stalls=args.stalls, restarts=args.restarts)
    faulted = settings_grid(args, plan)
    grid = [x for pair in zip((dataclasses.replace(s, faults=None) for s in faulted), faulted, strict=True) for x in pair]
    ran = sweep(partial(provide, args), strategies, grid, ProgressEvents(err), asked=asked_topology(args))
    results = ran.results
    report_runs(ran.server, results, args, console, "faults", f"claimcheck faults: {server_title(ran.server)}",
                always_write=True, evidence=EVIDENCE_JOBS)
    console.print(cost_table(results))
    failed = [r for r in results if not r.exactly_once and r.strategy.expected != "unsafe"]
    return 1 if failed else 0


def cost_table(results: list) -> Table:
    """Drain time with faults against the same run without, per strategy and mode."""
    table = Table(title="what the faults cost", title_justify="left", header_style="bold")
    for name in ("strategy", "mode", "drain s (no faults)", "drain s (faults)", "ratio", "faults",
                 "killed jobs back after", "redeliveries", "lost jobs", "verdict"):
        table.add_column(name, justify="left" if name in ("strategy", "mode", "verdict") else "right")
    for base, hit in zip(results[::2], results[1::2]):
        lost = hit.verdict.unclaimed_jobs + hit.unfinished_jobs
        table.add_row(hit.strategy.name, hit.settings.mode, f"{base.elapsed_s:.2f}", f"{hit.elapsed_s:.2f}",
                      f"{hit.elapsed_s / base.elapsed_s:.1f}x" if base.elapsed_s else "-",
                      ", ".join(f"{k} {n}" for k, n in _count(hit.faults).items()) or "none",
                      _recovery(hit), f"{hit.verdict.redeliveries:,}", str(lost),
                      "[green]held[/]" if hit.exactly_once else "[red]VIOLATED[/]")
    return table


def _recovery(run) -> str:
    """Lock mode: a killed worker's transaction rolls back, its jobs are free at once and no claim
    of them was ever committed. Lease mode: they come back only when the lease expires and the
    reaper returns them."""
    wait = recovery_s(run.faults, "kill")
    if wait is not None:
        return f"{wait:.2f}s (lease + reaper)"
    return "at once (rolled back)" if run.settings.mode == "lock" else "-"


def _count(events: list) -> dict[str, int]:
    counts: dict[str, int] = {}
    for event in events:
        counts[event.kind] = counts.get(event.kind, 0) + 1
    return counts
