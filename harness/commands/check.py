"""`claimcheck check FILE.sql`: the exactly-once verdict for one claim strategy."""
from __future__ import annotations

import argparse

from rich.console import Console

from harness.commands._options import add_run_options, add_server_options, report_runs, settings_grid
from harness.provision import provide_server
from harness.report import print_server
from harness.session import run_all
from harness.strategy import load_strategy

EVIDENCE_JOBS = 5


def register(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser("check", help="the exactly-once verdict for one claim strategy")
    p.add_argument("strategy", help="a .sql file in the strategy contract, or a built-in name")
    add_run_options(p, workers="16", jobs=20_000, modes="lease", work_ms="0")
    add_server_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, console: Console, err: Console) -> int:
    strategy = load_strategy(args.strategy)
    grid = settings_grid(args)
    with provide_server(args.dsn, args.pg) as server:
        print_server(err, server)
        results = run_all(server, [strategy], grid, err)
        report_runs(server, results, args, console, "check",
                    f"claimcheck check {strategy.name}: PostgreSQL {server.version} ({server.source})",
                    always_write=False, evidence=EVIDENCE_JOBS)
    held = all(r.verdict.exactly_once for r in results)
    console.print("[bold green]exactly-once held[/]" if held else "[bold red]exactly-once violated[/]")
    return 0 if held else 1
