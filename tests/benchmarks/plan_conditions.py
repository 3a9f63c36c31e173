"""The plan each planner condition gives each claim, printed, never asserted (no workers run).

    .venv/bin/python tests/benchmarks/plan_conditions.py [--plans all] [FILE_OR_NAME ...]

Default: every built-in strategy and every field case (tests/field/*.sql). For each condition of
`check --plans` (docs/plans.md): the shape of the claim's picking statement (node types, nested)
and whether its limiting subquery can run more than once per statement, from EXPLAIN ANALYZE in a
rolled-back transaction on the condition's own tables. Needs $CLAIMCHECK_DSN or starts a server.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from pg_claimcheck.scenarios import builtin_names

from pg_claimcheck.contract.strategy import load_strategy, validate_on_server
from pg_claimcheck.plans.conditions import CHOICES, build_tables
from pg_claimcheck.plans.explore import condition_settings, plan_under
from pg_claimcheck.server.provision import provide_server
from pg_claimcheck.server.session import run_schema
from pg_claimcheck.settings import RunSettings

FIELD = Path(__file__).parents[1] / "field"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--plans", default="all", choices=("default", "all"))
    parser.add_argument("--jobs", type=int, default=2_000, help="the as-seeded table's jobs (check's default: 20,000)")
    parser.add_argument("strategies", nargs="*")
    args = parser.parse_args()
    names = args.strategies or [*builtin_names(), *sorted(str(p) for p in FIELD.glob("*.sql"))]
    settings = RunSettings(workers=4, jobs=args.jobs)
    with provide_server(os.environ.get("CLAIMCHECK_DSN")) as server:
        for name in names:
            strategy = load_strategy(name)
            with run_schema(server) as (conn, run):
                for condition in CHOICES[args.plans]:
                    if not condition.applies_to(strategy):
                        print(f"{strategy.name:42} {condition.name:17} not applicable")
                        continue
                    jobs = condition_settings(condition, settings).jobs
                    build_tables(conn, run, strategy, condition, jobs)
                    validate_on_server(conn, strategy)
                    try:
                        shape = plan_under(run, strategy, condition, settings.batch, analyze=True)
                    except Exception as exc:  # noqa: BLE001 - printed, the next condition goes on
                        print(f"{strategy.name:42} {condition.name:17} cannot be planned: {exc}")
                        continue
                    mark = "RUNS PER ROW" if not shape.runs_once else "once"
                    print(f"{strategy.name:42} {condition.name:17} {mark:12} {shape.signature}")


if __name__ == "__main__":
    main()
