"""`claimcheck bench`: claim strategies side by side on one server."""
from __future__ import annotations

import argparse
import dataclasses

from rich.console import Console

from claimcheck.commands._options import add_run_options, add_server_options, report_runs, settings_grid, str_list
from claimcheck.probes.explain import PlanVerdict, plan_verdict, prepare_plan_table
from claimcheck.provision import Server, provide_server
from claimcheck.report import print_server
from claimcheck.session import run_all, run_schema
from claimcheck.strategy import Strategy, load_strategy
from claimcheck.scenarios import CATALOG

EVIDENCE_JOBS = 1  # per violating run: the table is the point, one story each is enough


def register(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser("bench", help="claim strategies side by side on one server")
    p.add_argument("--strategies", type=str_list, default=list(CATALOG),
                   help="built-in names or .sql files, comma-separated (default: the whole catalog)")
    add_run_options(p, workers="8", jobs=5_000, modes="lease,lock", work_ms="1")
    p.add_argument("--pgbench", action="store_true",
                   help="also run each strategy's SQL through pgbench (same clients, server and table size) "
                        "and report our jobs/s over pgbench's")
    add_server_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, console: Console, err: Console) -> int:
    strategies = [load_strategy(name) for name in args.strategies]
    grid = settings_grid(args)
    with provide_server(args.dsn, args.pg) as server:
        print_server(err, server)
        results = run_all(server, strategies, grid, err, pgbench=args.pgbench)
        err.print("planning each claim on a queue with history (the plan guard of `claimcheck explain`)")
        shapes = plan_shapes(server, strategies)
        results = [dataclasses.replace(r, plan=shapes.get(r.strategy.name)) for r in results]
        report_runs(server, results, args, console, "bench",
                    f"claimcheck bench: PostgreSQL {server.version} ({server.source})",
                    always_write=True, evidence=EVIDENCE_JOBS)
    # A strategy believed unsafe showing its violation is the point of the table; a safe one
    # (or a user's file, which makes no claim) that violates is a finding.
    failed = [r for r in results if not r.exactly_once and r.strategy.expected != "unsafe"]
    return 1 if failed else 0


def plan_shapes(server: Server, strategies: list[Strategy]) -> dict[str, PlanVerdict]:
    """Each strategy's plan on a table of finished jobs and a few ready ones, judged by the guard."""
    with run_schema(server) as (conn, schema, _):
        prepare_plan_table(conn, schema)
        # The guard plans against claimcheck's jobs table: a file with its own tables is not planned.
        return {s.name: plan_verdict(conn, s) for s in strategies if not s.own_schema}
