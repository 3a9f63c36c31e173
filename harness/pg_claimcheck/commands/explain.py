"""`claimcheck explain FILE.sql|NAME`: the plan guard. Exit 0 when every claim's plan locks rows
as it picks them (Limit -> LockRows), reaches ready rows through an index, and runs its limiting
subquery once per statement under every planner condition (pg_claimcheck.plans); 1 when one does not."""
from __future__ import annotations

import argparse

from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from pg_claimcheck.commands import VERBS
from pg_claimcheck.commands._options import add_json_option, add_server_options, provide
from pg_claimcheck.contract.strategy import load_strategy, validate_on_server
from pg_claimcheck.errors import UsageError
from pg_claimcheck.plans.conditions import CHOICES, CONDITION_JOBS, HISTORY, TablesUnavailable, build_tables
from pg_claimcheck.plans.explore import plan_under
from pg_claimcheck.plans.shape import FINISHED_JOBS, READY_JOBS, prepare_plan_table
from pg_claimcheck.probes._report import maybe_write, probe_document
from pg_claimcheck.probes.explain import PlanVerdict, plan_verdict, with_conditions
from pg_claimcheck.report.render import print_server, server_title
from pg_claimcheck.server.session import run_schema
from pg_claimcheck.settings import positive

MAX_FINISHED_JOBS = 10_000_000
GUARD_BATCH = 10
GUARD_CONDITIONS = tuple(c for c in CHOICES["all"] if c.table not in ("seeded", "history"))
"""Every planner condition but the two whose tables are the guard's own: the history table with
--finished and --ready is the as-seeded table of explain, planned first."""


def register(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser("explain", help=VERBS["explain"])
    p.add_argument("strategies", nargs="+", metavar="STRATEGY",
                   help="a .sql file in the strategy contract, or a built-in name (several allowed)")
    p.add_argument("--finished", type=int, default=FINISHED_JOBS,
                   help=f"finished jobs in the planned table (default {FINISHED_JOBS:,})")
    p.add_argument("--ready", type=int, default=READY_JOBS, help=f"ready (queued) jobs (default {READY_JOBS})")
    add_json_option(p)
    add_server_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, console: Console, err: Console) -> int:
    positive("--finished", args.finished, minimum=0, maximum=MAX_FINISHED_JOBS)
    positive("--ready", args.ready)
    strategies = [load_strategy(name) for name in args.strategies]
    own = [s.source for s in strategies if s.own_schema]
    if own:
        raise UsageError(f"explain plans claims on claimcheck's jobs table with history; {own[0]} brings its own "
                         "tables (run EXPLAIN on them yourself, or `claimcheck check` it)")
    with provide(args) as server:
        print_server(err, server)
        with run_schema(server) as (conn, run):
            prepare_plan_table(conn, run.schema, args.finished, args.ready)
            verdicts, shapes = [], {}
            for strategy in strategies:
                validate_on_server(conn, strategy)
                verdicts.append(plan_verdict(conn, strategy))
                shapes[strategy.name] = [(HISTORY.name, plan_under(run, strategy, HISTORY, GUARD_BATCH, analyze=True))]
            for condition in GUARD_CONDITIONS:  # each condition's tables once, every strategy planned on them
                if condition.generic and not run.topology.opens_blocks():
                    err.print(f"  {condition.name}: not planned: a generic plan is that of a statement prepared on "
                              "one backend, and a statement pool gives each statement any backend", highlight=False,
                              soft_wrap=True)
                    continue
                try:
                    build_tables(conn, run, strategies[0], condition, condition.jobs(CONDITION_JOBS, GUARD_BATCH))
                except TablesUnavailable as exc:  # stale-stats behind statement pooling: said, and left out
                    err.print(f"  {condition.name}: not planned: {exc}", highlight=False, soft_wrap=True)
                    continue
                for strategy in strategies:
                    shapes[strategy.name].append(
                        (condition.name, plan_under(run, strategy, condition, GUARD_BATCH, analyze=True)))
            verdicts = [with_conditions(v, shapes[v.strategy]) for v in verdicts]
        table_shape = f"{args.finished:,} finished + {args.ready:,} ready jobs, analyzed"
        for verdict in verdicts:
            console.print(plan_panel(verdict))
            for name, shape in verdict.rescanned():
                console.print(Panel(Text(shape.text + "\n" + "\n".join(shape.why),
                                         style="yellow"),
                                    title=f"{verdict.strategy}: the plan under {name}", title_align="left",
                                    expand=False))
        console.print(verdict_table(verdicts, f"claimcheck explain: {table_shape}: {server_title(server)}"))
        doc = probe_document(server, args, "explain", {"table": {"finished": args.finished, "ready": args.ready},
                                                       "plans": [v.as_dict() for v in verdicts]})
        maybe_write(doc, args.json, "explain", console)
    return 0 if all(v.shape_ok for v in verdicts) else 1


def _verdict_text(verdict: PlanVerdict) -> Text:
    return Text("shape holds", style="bold green") if verdict.shape_ok else Text("SHAPE FAILS", style="bold red")


def plan_panel(verdict: PlanVerdict) -> Panel:
    return Panel(Text(verdict.plan), title=f"{verdict.strategy}: EXPLAIN (COSTS OFF) of '{verdict.section}'",
                 title_align="left", expand=False)


def verdict_table(verdicts: list[PlanVerdict], title: str) -> Table:
    table = Table(title=title, header_style="bold", title_justify="left")
    table.add_column("strategy")
    table.add_column("planned")
    table.add_column("verdict", no_wrap=True)
    table.add_column("why")
    for v in verdicts:
        table.add_row(v.strategy, v.section, _verdict_text(v), "\n".join(f"• {r}" for r in v.reasons))
    return table
