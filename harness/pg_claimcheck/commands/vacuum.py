"""`claimcheck vacuum`: dead tuples kept by held transactions, the archive step, and (with
--soak) what a held snapshot costs a busy queue over time."""
from __future__ import annotations

import argparse

from rich.console import Console

from pg_claimcheck.commands import VERBS
from pg_claimcheck.commands._options import add_json_option, add_server_options, provide, str_list
from pg_claimcheck.contract.strategy import load_strategy
from pg_claimcheck.engine.driver import validate
from pg_claimcheck.errors import UsageError
from pg_claimcheck.probes._report import maybe_write, probe_document
from pg_claimcheck.probes._work import PROBE_STRATEGY
from pg_claimcheck.probes.soak import run_soak
from pg_claimcheck.probes.tables import archive_table, soak_table, vacuum_table
from pg_claimcheck.probes.vacuum import HOLDERS, archive, run_vacuum_probe
from pg_claimcheck.report.render import print_server, server_title
from pg_claimcheck.server.schema import build_jobs_table
from pg_claimcheck.server.session import run_schema
from pg_claimcheck.server.topology import refuse_blocks
from pg_claimcheck.settings import positive

DEFAULT_JOBS = 2_000  # seed 003: "let other workers process 2,000 jobs"
MAX_JOBS = 1_000_000
DEFAULT_ARCHIVE_BATCH = 1_000  # seed 003 deletes 10,000 at a time from a larger table
MAX_SOAK_S = 3_600.0
MIN_SOAK_S = 0.5
VALIDATION_JOBS = 10  # a small table to run the strategy's statements on once, rolled back


def register(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser("vacuum", help=VERBS["vacuum"])
    p.add_argument("--jobs", type=int, default=DEFAULT_JOBS,
                   help=f"jobs the other workers process while each holder is open (default {DEFAULT_JOBS:,})")
    p.add_argument("--holders", type=str_list, default=list(HOLDERS),
                   help=f"holder modes, comma-separated (default all: {', '.join(HOLDERS)})")
    p.add_argument("--strategy", default=PROBE_STRATEGY,
                   help=f"claim/complete statements the workers run: a built-in or .sql file (default {PROBE_STRATEGY}; "
                        "skip-locked-done writes one row version per job, like the seed's pgbench run)")
    p.add_argument("--archive-batch", type=int, default=DEFAULT_ARCHIVE_BATCH,
                   help=f"rows per DELETE in the archive step (default {DEFAULT_ARCHIVE_BATCH:,})")
    p.add_argument("--soak", type=float, metavar="SECONDS",
                   help="also run a steady load this long per phase, without and with a held snapshot")
    add_json_option(p)
    add_server_options(p)
    p.set_defaults(func=run)


def check_args(args: argparse.Namespace) -> None:
    positive("--jobs", args.jobs, maximum=MAX_JOBS)
    positive("--archive-batch", args.archive_batch)
    if args.soak is not None:
        positive("--soak", args.soak, minimum=MIN_SOAK_S, maximum=MAX_SOAK_S)
    unknown = [h for h in args.holders if h not in HOLDERS]
    if unknown or not args.holders:
        raise UsageError(f"--holders {','.join(args.holders)!r}: choose from {', '.join(HOLDERS)}")


def run(args: argparse.Namespace, console: Console, err: Console) -> int:
    check_args(args)
    strategy = load_strategy(args.strategy)
    with provide(args) as server:
        print_server(err, server)
        refuse_blocks(  # --pooler pgbouncer:statement pools only the queue's workers
            server.topology, "vacuum cannot run through a pooler in statement mode in front of --dsn",
            "its holders keep a transaction open while the workers run (what holds VACUUM back)",
            "point --dsn at the server and give --pooler pgbouncer:statement, which puts only the workers behind "
            "a statement pool")
        with run_schema(server) as (conn, run):
            build_jobs_table(conn, run.schema, VALIDATION_JOBS)
            validate(run, strategy)  # as `check` does: a broken file is one clear error, first
            rows = run_vacuum_probe(conn, run, strategy, args.jobs, args.holders,
                                    progress=lambda text: err.print(f"  {text}", highlight=False))
            err.print(f"  archive: {args.jobs:,} jobs processed, then deleted in batches", highlight=False)
            archived = archive(conn, run, strategy, args.jobs, args.archive_batch)
            phases = []
            if args.soak is not None:
                err.print(f"  soak: {args.soak:g}s per phase, without and with a held snapshot", highlight=False)
                phases = run_soak(conn, run, strategy, args.soak)
        where = server_title(server)
        console.print(vacuum_table(rows, f"claimcheck vacuum: {strategy.name}, {args.jobs:,} jobs per holder: {where}"))
        _print_notes(console, rows, 2 if strategy.has_complete else 1)
        console.print(archive_table(archived, "archive step (seed 003): delete finished jobs in batches"))
        if phases:
            console.print(soak_table(phases, f"soak: {args.soak:g}s of steady enqueue/claim/complete per phase"))
        doc = probe_document(server, args, "vacuum", {
            "strategy": strategy.name, "holders": [r.as_dict() for r in rows], "archive": archived.as_dict(),
            "soak": [p.as_dict() for p in phases]})
        maybe_write(doc, args.json, "vacuum", console)
    return 0


def _print_notes(console: Console, rows: list, versions_per_job: int) -> None:
    for row in rows:
        for when, outside in (("while held", row.outside), ("after release", row.outside_after)):
            if outside.any:
                cutoff = ", and VACUUM's cutoff predates the workload" if outside.cutoff_predates_workload else ""
                console.print(f"[yellow]note[/]: '{row.holder}' {when}: {outside.sessions} other session(s) "
                              f"(oldest {outside.oldest_age or 0:,} xids), {outside.prepared} prepared "
                              f"transaction(s), {outside.slots} replication slot(s){cutoff}: the horizon was held "
                              "by others too, so what VACUUM kept may be theirs, not the holder's.")
    console.print("[dim]xmin age: the holder's snapshot; xid age: its own transaction id (it has written). "
                  "Either keeps every row version that died after it. Each job leaves "
                  f"{versions_per_job} dead row version(s) here, so a held horizon keeps about "
                  f"{versions_per_job} per job processed.[/]")
