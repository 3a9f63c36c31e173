"""The `claimcheck` command (also `python -m harness`).

Exit codes: 0 the run finished and every check held; 1 it finished and a violation was found;
2 bad input or environment (one paragraph on stderr, no traceback), or an interrupt.
"""
from __future__ import annotations

import argparse
import itertools
import signal
import sys
import time
from pathlib import Path
from typing import Sequence

from rich.console import Console

from harness.driver import RunResult
from harness.errors import ClaimcheckError, Interrupted
from harness.provision import DSN_ENV, Server, provide_server
from harness.report import document, print_evidence, print_server, results_table, write_json
from harness.session import run_all
from harness.settings import RunSettings, WorkTime
from harness.strategy import load_strategy
from scenarios import CATALOG

REPORT_WIDTH_WHEN_PIPED = 170
BENCH_EVIDENCE_JOBS = 1  # per violating run: the table is the point, one story each is enough
CHECK_EVIDENCE_JOBS = 5


def _int_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or a comma-separated list of numbers, got {text!r}")


def _str_list(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def _add_server_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("server")
    g.add_argument("--dsn", help=f"connect to this server and start nothing (default: ${DSN_ENV})")
    g.add_argument("--pg", metavar="KIND", help="start a server: embedded (default, PostgreSQL 18), embedded:16, "
                                                "system (the machine's pg_ctl), docker:VERSION")


def _add_run_options(p: argparse.ArgumentParser, *, workers: str, jobs: int, modes: str, work_ms: str) -> None:
    g = p.add_argument_group("load")
    g.add_argument("--workers", type=_int_list, default=_int_list(workers),
                   help=f"worker processes, or a comma list to sweep (default {workers})")
    g.add_argument("--jobs", type=int, default=jobs, help=f"jobs seeded per run (default {jobs:,})")
    g.add_argument("--batch", type=_int_list, default=[10], help="jobs per claim, or a comma list (default 10)")
    g.add_argument("--mode", type=_str_list, default=_str_list(modes),
                   help="lease: claim+commit, work outside, complete in a second transaction; "
                        f"lock: claim, work and complete in one transaction; a comma list runs both (default {modes})")
    g.add_argument("--work-ms", default=work_ms, help=f"work per job: 5, a range 1-10, or exp:5 (default {work_ms})")
    g.add_argument("--poll-ms", type=float, default=10.0, help="sleep after an empty claim (default 10)")
    g.add_argument("--lease-seconds", type=float, default=300.0, help="lease written by the claim (default 300)")
    g.add_argument("--duration", type=float, help="stop after this many seconds even if jobs remain")
    g.add_argument("--claims-per-worker", type=int, help="stop each worker after this many claim transactions "
                                                         "(like pgbench -t)")
    g.add_argument("--json", type=Path, help="write the JSON report here")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="claimcheck", description="Is a PostgreSQL job queue's claim "
                                     "exactly-once, and what does each claim strategy cost?")
    verbs = parser.add_subparsers(dest="verb", required=True)
    bench = verbs.add_parser("bench", help="claim strategies side by side on one server")
    bench.add_argument("--strategies", type=_str_list, default=list(CATALOG),
                       help="built-in names or .sql files, comma-separated (default: the whole catalog)")
    _add_run_options(bench, workers="8", jobs=5_000, modes="lease,lock", work_ms="1")
    _add_server_options(bench)
    bench.set_defaults(func=cmd_bench)
    check = verbs.add_parser("check", help="the exactly-once verdict for one claim strategy")
    check.add_argument("strategy", help="a .sql file in the strategy contract, or a built-in name")
    _add_run_options(check, workers="16", jobs=20_000, modes="lease", work_ms="0")
    _add_server_options(check)
    check.set_defaults(func=cmd_check)
    return parser


def settings_grid(args: argparse.Namespace) -> list[RunSettings]:
    work = WorkTime.parse(args.work_ms)
    return [RunSettings(workers=w, jobs=args.jobs, batch=b, mode=m, work=work, poll_ms=args.poll_ms,
                        lease_seconds=args.lease_seconds, duration_s=args.duration,
                        claims_per_worker=args.claims_per_worker)
            for m, w, b in itertools.product(args.mode, args.workers, args.batch)]


def _report(server: Server, results: list[RunResult], args: argparse.Namespace, console: Console,
            verb: str, title: str, always_write: bool, evidence: int) -> None:
    console.print(results_table(results, title))
    for result in results:
        print_evidence(console, result, evidence)
    doc = document(server, results, command=" ".join(["claimcheck", *sys.argv[1:]]),
                   settings={k: v for k, v in vars(args).items() if k not in ("func", "json")
                             and isinstance(v, (str, int, float, list, type(None)))})
    if args.json or always_write:
        path = write_json(doc, args.json, verb)
        console.print(f"JSON report: {path}")


def cmd_bench(args: argparse.Namespace, console: Console, err: Console) -> int:
    strategies = [load_strategy(name) for name in args.strategies]
    grid = settings_grid(args)
    with provide_server(args.dsn, args.pg) as server:
        print_server(err, server)
        results = run_all(server, strategies, grid, err)
        _report(server, results, args, console, "bench",
                f"claimcheck bench: PostgreSQL {server.version} ({server.source})", always_write=True, evidence=BENCH_EVIDENCE_JOBS)
    # A strategy believed unsafe showing its violation is the point of the table; a safe one
    # (or a user's file, which makes no claim) that violates is a finding.
    failed = [r for r in results if not r.verdict.exactly_once and r.strategy.expected != "unsafe"]
    return 1 if failed else 0


def cmd_check(args: argparse.Namespace, console: Console, err: Console) -> int:
    strategy = load_strategy(args.strategy)
    grid = settings_grid(args)
    with provide_server(args.dsn, args.pg) as server:
        print_server(err, server)
        results = run_all(server, [strategy], grid, err)
        _report(server, results, args, console, "check",
                f"claimcheck check {strategy.name}: PostgreSQL {server.version} ({server.source})",
                always_write=False, evidence=CHECK_EVIDENCE_JOBS)
    held = all(r.verdict.exactly_once for r in results)
    console.print("[bold green]exactly-once held[/]" if held else "[bold red]exactly-once violated[/]")
    return 0 if held else 1


def _terminate_as_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    console, err = Console(), Console(stderr=True)
    if not console.is_terminal:  # a pipe or a CI log: don't squeeze the table into 80 columns
        console = Console(width=REPORT_WIDTH_WHEN_PIPED)
    signal.signal(signal.SIGTERM, _terminate_as_interrupt)
    started = time.monotonic()
    try:
        code = args.func(args, console, err)
    except KeyboardInterrupt:
        err.print("claimcheck: interrupted; workers stopped, schema dropped, any server we started stopped.")
        return 2
    except Interrupted as exc:
        err.print(f"claimcheck: {exc}; schema dropped, any server we started stopped.")
        return 2
    except ClaimcheckError as exc:
        err.print(f"claimcheck: error: {exc}", highlight=False, markup=False)
        return 2
    err.print(f"finished in {time.monotonic() - started:.1f}s", highlight=False)
    return code
