"""Plans: the claim under the planner conditions real queues reach (docs/plans.md).

`conditions` says what each condition is and builds its tables, `shape` reads a plan and finds a
limiting subquery that can run more than once per statement, `explore` runs a strategy under the
conditions for `check` and the pytest plugin.
"""
from pathlib import Path

from claimcheck.contract.sqlfile import load_queries

PLAN_QUERIES: dict[str, str] = load_queries(Path(__file__).parents[1] / "sql" / "plans.sql")
"""The plans' SQL, by name, from `harness/claimcheck/sql/plans.sql`."""
AS_SEEDED = "as-seeded"
"""The condition of the run as seeded (the run `check --plans none` makes): compare matches a run of
a report without conditions to it."""


def run_condition(run: dict) -> str:
    """The planner condition a report's run object was made under: a run that names none (schema
    version 1, `--plans none`, bench) is the as-seeded run."""
    return run.get("condition") or AS_SEEDED
