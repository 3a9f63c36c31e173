"""Plans: the claim under the planner conditions real queues reach (docs/plans.md).

`conditions` says what each condition is and builds its tables, `shape` reads a plan and finds a
limiting subquery that can run more than once per statement, `explore` runs a strategy under the
conditions for `check` and the pytest plugin.
"""
from pathlib import Path

from pg_claimcheck.contract.sqlfile import load_queries
from pg_claimcheck.verdict.result import AS_SEEDED, run_condition

__all__ = ["AS_SEEDED", "PLAN_QUERIES", "run_condition"]

PLAN_QUERIES: dict[str, str] = load_queries(Path(__file__).parents[1] / "sql" / "plans.sql")
"""The plans' SQL, by name, from `harness/pg_claimcheck/sql/plans.sql`."""
