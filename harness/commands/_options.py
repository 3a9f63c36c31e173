"""Options and output shared by the verbs."""
from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

from rich.console import Console

from harness.driver import RunResult
from harness.provision import DSN_ENV, Server
from harness.report_html import write_html
from harness.report import document, print_evidence, results_table, write_json
from harness.settings import RunSettings, WorkTime


def int_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or a comma-separated list of numbers, got {text!r}")


def str_list(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def add_server_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("server")
    g.add_argument("--dsn", help=f"connect to this server and start nothing (default: ${DSN_ENV})")
    g.add_argument("--pg", metavar="KIND", help="start a server: embedded (default, PostgreSQL 18), embedded:16, "
                                                "system (the machine's pg_ctl), docker:VERSION")


def add_json_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", type=Path, help="write the JSON report here")


def add_run_options(p: argparse.ArgumentParser, *, workers: str, jobs: int, modes: str, work_ms: str) -> None:
    g = p.add_argument_group("load")
    g.add_argument("--workers", type=int_list, default=int_list(workers),
                   help=f"worker processes, or a comma list to sweep (default {workers})")
    g.add_argument("--jobs", type=int, default=jobs, help=f"jobs seeded per run (default {jobs:,})")
    g.add_argument("--batch", type=int_list, default=[10], help="jobs per claim, or a comma list (default 10)")
    g.add_argument("--mode", type=str_list, default=str_list(modes),
                   help="lease: claim+commit, work outside, complete in a second transaction; "
                        f"lock: claim, work and complete in one transaction; a comma list runs both (default {modes})")
    g.add_argument("--work-ms", default=work_ms, help=f"work per job: 5, a range 1-10, or exp:5 (default {work_ms})")
    g.add_argument("--poll-ms", type=float, default=10.0, help="sleep after an empty claim (default 10)")
    g.add_argument("--lease-seconds", type=float, default=300.0, help="lease written by the claim (default 300)")
    g.add_argument("--duration", type=float, help="stop after this many seconds even if jobs remain")
    g.add_argument("--claims-per-worker", type=int, help="stop each worker after this many claim transactions "
                                                         "(like pgbench -t)")
    add_json_option(g)


def settings_grid(args: argparse.Namespace) -> list[RunSettings]:
    work = WorkTime.parse(args.work_ms)
    return [RunSettings(workers=w, jobs=args.jobs, batch=b, mode=m, work=work, poll_ms=args.poll_ms,
                        lease_seconds=args.lease_seconds, duration_s=args.duration,
                        claims_per_worker=args.claims_per_worker)
            for m, w, b in itertools.product(args.mode, args.workers, args.batch)]


def plain_settings(args: argparse.Namespace) -> dict:
    """The command line's settings, as the JSON report's `settings`."""
    return {k: v for k, v in vars(args).items()
            if k not in ("func", "json") and isinstance(v, (str, int, float, list, type(None)))}


def report_runs(server: Server, results: list[RunResult], args: argparse.Namespace, console: Console,
                verb: str, title: str, always_write: bool, evidence: int) -> None:
    console.print(results_table(results, title))
    for result in results:
        print_evidence(console, result, evidence)
    doc = document(server, results, command=" ".join(["claimcheck", *sys.argv[1:]]), settings=plain_settings(args))
    if args.json or always_write:
        path = write_json(doc, args.json, verb)
        console.print(f"JSON report: {path}")
        console.print(f"HTML report: {write_html(doc, path)}")
