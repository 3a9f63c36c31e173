"""The field corpus under planner conditions, one session per file, printed, never asserted
(run: .venv/bin/python tests/benchmarks/field_plans.py [--only NAME,...] [--plans]).

For each `tests/field/*.sql` with its own tables, in the run's schema on the server of
$CLAIMCHECK_DSN (or an embedded one), each condition starts from the file's `schema` section:

- `analyzed`: 41 jobs seeded, then ANALYZE: the plan a plain `check` gets today;
- `stale`: 1 job seeded, ANALYZE, autovacuum (and so autoanalyze) off on the file's tables, then
  40 more seeded: a small queue that drained and refilled between two autoanalyzes;
- `no-hash`: 200 jobs seeded and analyzed, and `enable_hashjoin`, `enable_hashagg`, `enable_sort`
  and `enable_material` off in the claim's transaction;
- `generic`: 41 jobs seeded and analyzed, the claim prepared and run by EXECUTE under
  `plan_cache_mode = force_generic_plan` (the plan a driver's prepared statement may get after
  five executions: made without the parameters' values, `%(batch)s` included).

Then the claim runs once under EXPLAIN (ANALYZE) in a transaction that is rolled back (a pick
first, its rows given to the claim as a worker gives them; a claim of several statements runs
them in order and explains its last, whose rows are the claim's), with `%(batch)s` = 2. Printed per
file and condition: the rows the claim took against its limit (pg_claimcheck.contract.limit: 2 for
`%(batch)s`, else the number written in it), OVER when it took more, `rescanned` when a
LockRows node ran more than once in the statement (the limiting, locking subquery on the inner
side of a nested loop), and the plan's shape (`--plans`: the whole tree).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import psycopg
from psycopg import sql

from pg_claimcheck.contract.dialect import to_positional
from pg_claimcheck.contract.limit import claim_limit
from pg_claimcheck.contract.strategy import execute_section, load_strategy, pick_params
from pg_claimcheck.server.provision import provide_server
from pg_claimcheck.server.schema import build_own_tables, key_base
from pg_claimcheck.server.session import run_schema

FIELD = Path(__file__).parents[1] / "field"
BATCH = 2
FILLED = 41
LARGER = 200
NO_HASH = ("enable_hashjoin", "enable_hashagg", "enable_sort", "enable_material")
CONDITIONS = ("analyzed", "stale", "no-hash", "generic")


def tables(conn: psycopg.Connection, schema: str) -> list[str]:
    return [r[0] for r in conn.execute("SELECT relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                                       "WHERE n.nspname = %s AND c.relkind = 'r' ORDER BY relname", (schema,))]


def prepare(conn: psycopg.Connection, schema: str, run_id: str, strategy, condition: str) -> None:
    """The file's tables in the state of `condition` (see the module's docstring)."""
    base = key_base(run_id)
    first = {"stale": 1, "no-hash": LARGER}.get(condition, FILLED)
    build_own_tables(conn, schema, strategy, first, base)  # schema, then seed (one transaction)
    with conn.transaction():
        for name in tables(conn, schema):
            conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(schema, name)))
    if condition == "stale":
        with conn.transaction():
            for name in tables(conn, schema):
                conn.execute(sql.SQL("ALTER TABLE {} SET (autovacuum_enabled = false)").format(
                    sql.Identifier(schema, name)))
            # The same seed again, its keys after the first job's.
            execute_section(conn, strategy, "seed", {"jobs": FILLED - 1, "key_base": base + 1})


def explain_claim(conn: psycopg.Connection, strategy, condition: str) -> dict:
    """The claim's EXPLAIN (ANALYZE) plan, run once in a transaction that is rolled back."""
    values = {"worker": "field-plans", "batch": BATCH, "lease_seconds": 30.0, "ids": []}
    with conn.transaction(force_rollback=True):
        conn.execute(sql.SQL("SET TRANSACTION ISOLATION LEVEL {}").format(sql.SQL(strategy.isolation.upper())))
        if condition == "no-hash":
            for setting in NO_HASH:
                conn.execute(sql.SQL("SET LOCAL {} = off").format(sql.Identifier(setting)))
        if strategy.has_pick:
            cur = execute_section(conn, strategy, "pick", values)
            values.update(pick_params(tuple(c.name for c in cur.description), cur.fetchall()))
        *before, (last, names) = strategy.bound_steps["claim"]
        for statement, used in before:
            conn.execute(statement, {k: values[k] for k in used})
        explain = "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF, FORMAT JSON) "
        if condition != "generic":
            return conn.execute(explain + last, {k: values[k] for k in names}).fetchone()[0][0]["Plan"]
        # EXPLAIN EXECUTE takes no bound parameters: the values go as literals (client-side).
        conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        text, order = to_positional(last)
        conn.execute(f"PREPARE field_plans_claim AS {text}")
        arguments = f"({', '.join(['%s'] * len(order))})" if order else ""
        plan = psycopg.ClientCursor(conn).execute(f"{explain}EXECUTE field_plans_claim{arguments}",
                                                  [values[k] for k in order]).fetchone()[0][0]["Plan"]
        conn.execute("DEALLOCATE field_plans_claim")
        return plan


def label(node: dict) -> str:
    name = node["Node Type"]
    if node.get("Operation") and name == "ModifyTable":
        name = node["Operation"]
    if node.get("Join Type") and node["Join Type"] != "Inner":
        name += f" {node['Join Type']}"
    where = node.get("Relation Name") or node.get("CTE Name") or node.get("Alias") if "Scan" in name else None
    loops = node.get("Actual Loops", 1)
    return (f"{name}{' on ' + where if where else ''} (rows={node.get('Actual Rows', 0)}"
            + (f" loops={loops}" if loops != 1 else "") + ")")


def shape(node: dict) -> str:
    """One line: a node, `<-` its only input, or [its inputs; ...]."""
    children = node.get("Plans", [])
    if not children:
        return label(node)
    if len(children) == 1:
        return f"{label(node)} <- {shape(children[0])}"
    return f"{label(node)} [{'; '.join(shape(c) for c in children)}]"


def tree(node: dict, depth: int = 0) -> list[str]:
    return ["    " + "  " * depth + label(node)] + [line for c in node.get("Plans", []) for line in tree(c, depth + 1)]


def rescanned(node: dict) -> bool:
    """A LockRows node run more than once in the statement: each run skips the rows the statement
    already changed and locks new ones. (A Limit rescanned over no lock, or over a CTE Scan, reads
    the same rows again: Hasura's fetch, pgqueuer's and pg-boss's claims show it, harmlessly.)"""
    return (node["Node Type"] == "LockRows" and node.get("Actual Loops", 1) > 1) or any(
        rescanned(c) for c in node.get("Plans", []))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma list of field file stems")
    parser.add_argument("--plans", action="store_true", help="print each plan's whole tree")
    args = parser.parse_args()
    only = set(args.only.split(",")) if args.only else None
    files = [p for p in sorted(FIELD.glob("*.sql")) if only is None or p.stem in only]
    with provide_server() as server:
        print(f"PostgreSQL {server.version} ({server.source}); %(batch)s = {BATCH}")
        for path in files:
            strategy = load_strategy(str(path))
            if not strategy.own_schema:
                print(f"{path.stem}: runs on claimcheck's jobs table, skipped")
                continue
            limit = claim_limit(strategy.statements, BATCH)
            print(f"{path.stem} (expected {strategy.expected}; limit {limit.describe()})")
            for condition in CONDITIONS:
                with run_schema(server) as (conn, run):
                    try:
                        prepare(conn, run.schema, run.run_id, strategy, condition)
                        plan = explain_claim(conn, strategy, condition)
                    except Exception as exc:  # noqa: BLE001 (a file this condition cannot set up: say so, go on)
                        print(f"  {condition:9} not run: {str(exc).splitlines()[0]}")
                        continue
                rows = plan.get("Actual Rows", 0)
                over = limit.rows is not None and rows > limit.rows
                flags = ", ".join(f for f, on in (("OVER", over), ("rescanned", rescanned(plan))) if on)
                print(f"  {condition:9} took {rows:>3} for limit {limit.rows if limit.rows else '?'}"
                      f"{'  ' + flags if flags else ''}: {shape(plan)}")
                if args.plans:
                    print("\n".join(tree(plan)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
