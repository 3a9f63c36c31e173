"""`claimcheck check FILE.sql`: the exactly-once verdict for one claim strategy."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from rich.console import Console

from pg_claimcheck import install_command
from pg_claimcheck.app.runs import run_all
from pg_claimcheck.commands import VERBS
from pg_claimcheck.commands._options import (
    add_producers_option,
    add_run_options,
    add_server_options,
    asked_topology,
    provide,
    refuse_combined,
    refuse_pooler,
    report_runs,
    settings_grid,
)
from pg_claimcheck.contract.strategy import load_strategy
from pg_claimcheck.engine.budget import DEFAULT_BUDGET_S, UNMEASURED_JOBS, Budget
from pg_claimcheck.engine.idle import check_wakeup
from pg_claimcheck.engine.producer import check_feedable
from pg_claimcheck.errors import UsageError
from pg_claimcheck.interleave.search import DEFAULT_EXAMPLES, search
from pg_claimcheck.interleave.trace import render
from pg_claimcheck.plans.conditions import CHOICES as PLAN_CHOICES
from pg_claimcheck.plans.explore import run_with_plans
from pg_claimcheck.plans.table import print_conditions
from pg_claimcheck.report.publish import plain_settings, print_conclusion
from pg_claimcheck.report.render import (
    document,
    print_power,
    print_producer,
    print_server,
    print_stop,
    server_title,
    write_json,
)
from pg_claimcheck.scenarios import CATALOG
from pg_claimcheck.server.provision import provide_server
from pg_claimcheck.settings import FaultPlan, positive
from pg_claimcheck.verdict.liveness import EXIT_CODES, HELD, NO_PROGRESS, VIOLATED, worst_outcome

EVIDENCE_JOBS = 5
DEFAULT_DATABASE = Path(".hypothesis") / "claimcheck"
MAX_EXAMPLES = 100_000


def register(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser("check", help=VERBS["check"])
    p.add_argument("strategy", help=f"a .sql file in the strategy contract, or a built-in name: {', '.join(CATALOG)}")
    add_run_options(p, workers="16", jobs=None, modes="lease", work_ms="0", faults=True, reports=False,
                    sweeps=False, jobs_help="seed this many jobs and drain them, a fixed size instead of the time "
                                            "budget (default: as many as fit in --budget)")
    p.add_argument("--budget", type=float, metavar="SECONDS",
                   help=f"seconds for the whole check, server start and every planner condition included "
                        f"(default {DEFAULT_BUDGET_S:g}; not with --jobs, --drain, --duration, --claims-per-worker, "
                        "--rate or --faults, which ask for a fixed size): a slow claim gets fewer jobs, a fast one more")
    p.add_argument("--faults", action="store_true",
                   help="inject faults while the load runs: SIGKILL workers, terminate backends, stall workers "
                        "past their lease, restart a server we started")
    p.add_argument("--plans", choices=tuple(PLAN_CHOICES), default="default",
                   help="planner conditions to run the claim under besides the run as seeded (stale statistics on "
                        "a small queue, join methods off, generic plans, a queue with history; see docs/plans.md): "
                        "default, all (more enable_* combinations), or none (the run as seeded only)")
    p.add_argument("--rate", type=float,
                   help="open loop: one producer enqueues this many jobs per second for --duration seconds while "
                        "the workers claim (after the --jobs seeded ones), then the workers drain; the run is the "
                        "as-seeded condition only (see docs/producers.md)")
    add_producers_option(p)
    p.add_argument("--wakeup", choices=("poll", "notify"), default="poll",
                   help="with --rate, what an idle worker does after an empty claim: poll (sleep --poll-ms, the "
                        "default) or notify (each enqueue sends NOTIFY in its transaction, idle workers LISTEN, with "
                        "a 1 s fallback poll); notify needs claimcheck's jobs table and no pooler")
    p.add_argument("--drain", action="store_true",
                   help="run until every job is claimed even after a violation is proven (by default a check "
                        "stops at the first proven double claim and reports what it saw)")
    g = p.add_argument_group("search (instead of the load run)")
    g.add_argument("--search", action="store_true",
                   help="let hypothesis search 2-3 session schedules for a double claim and shrink it")
    g.add_argument("--max-examples", type=int, default=DEFAULT_EXAMPLES,
                   help=f"schedules to try (default {DEFAULT_EXAMPLES})")
    g.add_argument("--seed", type=int, help="hypothesis seed, for a reproducible search")
    g.add_argument("--hypothesis-db", type=Path, default=DEFAULT_DATABASE,
                   help=f"where found counterexamples are kept and replayed first (default {DEFAULT_DATABASE})")
    g.add_argument("--save-spec", type=Path, help="write a found counterexample here as a spec file")
    e = p.add_argument_group("engine (more load than one machine: see docs/locust.md)")
    e.add_argument("--engine", choices=("fork", "locust"), default="fork",
                   help="fork: one process per worker (default); locust: Locust users, one claimer each "
                        f"({install_command('locust')})")
    e.add_argument("--users", type=int, default=100, help="--engine locust: claimers (Locust users; default 100)")
    e.add_argument("--processes", type=int, default=2,
                   help="--engine locust: Locust worker processes on this box (default 2)")
    add_server_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, console: Console, err: Console) -> int:
    if args.rate is not None:
        refuse_combined("--rate runs the fork engine's load run",
                        (("--engine locust", args.engine == "locust"), ("--search", args.search)))
    budget = check_budget_option(args)  # from here: the server's start is in it
    if args.engine == "locust":
        from pg_claimcheck.locust.engine import run_check

        refuse_pooler(args, "--engine locust")
        load_strategy(args.strategy)  # a bad file is reported here, before any process starts
        return run_check(args, console, err)
    strategy = load_strategy(args.strategy)
    # Built (so checked) even for a search, which runs no load: a bad option is refused either way.
    grid = settings_grid(args, FaultPlan() if args.faults else None, stop_early=not args.drain)
    if args.search:
        return run_search(args, strategy, console, err)
    # Before any server or pooler starts; a pooler found in front of --dsn is refused by the driver the same way.
    check_wakeup(strategy, grid[0], asked_topology(args))
    check_feedable(strategy, grid[0])
    conditions = PLAN_CHOICES[args.plans]
    if args.rate is not None:
        conditions = rate_conditions(args, err)
    with provide(args) as server:
        print_server(err, server)
        if budget is not None:
            budget.record("server", time.monotonic() - budget.started)
        if conditions:
            results, outcomes = run_with_plans(server, strategy, grid, conditions, err, budget=budget)
        else:
            results, outcomes = run_all(server, [strategy], grid, err, budget=budget), None
        doc = report_runs(server, results, args, console, "check",
                    f"claimcheck check {strategy.name}: {server_title(server)}",
                    always_write=False, evidence=EVIDENCE_JOBS, plans=outcomes, budget=budget)
        if outcomes is not None:
            print_conditions(console, outcomes, strategy.name)
    for result in results:
        print_stop(console, result)
        print_producer(console, result)
    print_conclusion(console, doc)
    outcome = worst_outcome(results)
    print_power(console, doc)
    console.print({HELD: "[bold green]exactly-once held[/]", VIOLATED: "[bold red]exactly-once violated[/]",
                   NO_PROGRESS: "[bold yellow]no progress[/] (a liveness failure: no job was handed out twice or "
                                "lost, but the queue did not finish its jobs within the limits; see above)"}[outcome])
    return EXIT_CODES[outcome]


FIXED_SIZE = (("--jobs", "jobs"), ("--drain", "drain"), ("--duration", "duration"),
              ("--claims-per-worker", "claims_per_worker"), ("--rate", "rate"), ("--faults", "faults"))
"""Options that ask for a run of a fixed size (or shape) instead of the time budget."""


def check_budget_option(args: argparse.Namespace) -> Budget | None:
    """The check's time budget, started now, or None for a fixed size. --jobs keeps its old default
    (20,000) where a fixed size is asked for without it."""
    fixed = [flag for flag, dest in FIXED_SIZE if getattr(args, dest, None) not in (None, False)]
    if args.jobs is None:
        args.jobs = UNMEASURED_JOBS
    if args.engine == "locust" or args.search:
        return None
    if args.budget is None:
        return None if fixed else Budget(DEFAULT_BUDGET_S)
    if fixed:
        raise UsageError(f"--budget sizes the check by time; {fixed[0]} asks for a fixed size: give one of them")
    return Budget(args.budget)


def rate_conditions(args: argparse.Namespace, err: Console) -> tuple:
    """A rate run is the as-seeded condition only: the planner conditions are built from a seeded
    table (docs/plans.md), which a producer changes under them. `--plans all` is refused with it."""
    if args.plans == "all":
        raise UsageError("--rate runs the as-seeded condition only: use --plans none (or leave --plans out)")
    if args.plans == "default":
        err.print("--rate: the run as seeded only, no planner conditions (docs/producers.md)")
    return ()


def run_search(args: argparse.Namespace, strategy, console: Console, err: Console) -> int:
    refuse_pooler(args, "--search")
    positive("--max-examples", args.max_examples, maximum=MAX_EXAMPLES)
    with provide_server(args.dsn, args.pg) as server:
        print_server(err, server)
        err.print(f"searching schedules of {strategy.name} (budget {args.max_examples})")
        result = search(server, strategy, max_examples=args.max_examples, seed=args.seed, database=args.hypothesis_db)
    figures = f"{result.examples_run} schedules in {result.seconds:.2f}s ({result.schedules_per_s:.0f}/s)"
    if result.counterexample is None:
        console.print(f"[bold green]no double claim found[/] in {figures}")
        outcome = 0
    else:
        console.print(f"[bold red]double claim found[/] and shrunk, {figures}. The minimal schedule:\n")
        for line in render(result.counterexample):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
        console.print("As a spec file you can save and replay with `claimcheck interleave FILE.spec`:\n")
        console.print(result.spec_text, markup=False, highlight=False, soft_wrap=True)
        if args.save_spec:
            args.save_spec.write_text(result.spec_text)
            console.print(f"saved to {args.save_spec}")
        outcome = 1
    if args.json:
        doc = document(server, [], command=" ".join(["claimcheck", *sys.argv[1:]]), settings=plain_settings(vars(args)))
        doc["search"] = {"strategy": strategy.name, "schedules": result.examples_run,
                         "seconds": round(result.seconds, 3),
                         "counterexample": render(result.counterexample) if result.counterexample else None,
                         "spec": result.spec_text}
        write_json(doc, args.json, "check")
    return outcome
