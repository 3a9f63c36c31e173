"""The plan guard: does the claim lock the rows it picks, and does it reach them through an index?

Seed 003's plan for a good claim is `Limit -> LockRows -> Index Scan using jobs_ready_idx`:
rows are locked as they are picked (so a second worker skips or waits for them), and a worker
touches only ready rows however long the history of finished jobs grows. We plan the claim on
a table shaped like a queue that has run for a while (many finished jobs, a few ready ones,
ANALYZEd) and check exactly that shape. A claim without a locking clause has no LockRows node
and fails; a Seq Scan of jobs under the Limit fails.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Iterator

import psycopg
from psycopg import ClientCursor, sql

from pg_claimcheck.contract.strategy import Strategy, sample_params, server_message
from pg_claimcheck.errors import SqlFileError
from pg_claimcheck.plans.shape import EXPLAIN_PREFIX, EXPLAIN_TIMEOUT_MS, SAMPLE_VALUES, json_plan
from pg_claimcheck.verdict.planshape import PlanVerdict

if TYPE_CHECKING:
    from pg_claimcheck.verdict.planshape import PlanShape

BATCH = 10
"""The batch the guard's claim is planned for."""
INDEX_ACCESS = ("Index Scan", "Index Only Scan", "Bitmap Heap Scan")
TABLE = "jobs"


def with_conditions(verdict: PlanVerdict, shapes: list[tuple[str, "PlanShape"]]) -> PlanVerdict:
    """The verdict, failed when under any condition the limiting, locking subquery can run more than
    once in one statement (a Limit or LockRows below the inner side of a nested loop, or loops > 1
    under EXPLAIN ANALYZE): one statement then takes more rows than its limit."""
    verdict = dataclasses.replace(verdict, conditions=tuple(shapes))
    bad = verdict.rescanned()
    if not bad:
        return dataclasses.replace(verdict, reasons=[*verdict.reasons, "the limiting subquery runs once per statement "
                                                     f"under every planner condition tried ({len(shapes)})"])
    names = ", ".join(name for name, _ in bad)
    name, shape = bad[0]
    why = shape.why[0]
    return dataclasses.replace(verdict, shape_ok=False, reasons=[
        *verdict.reasons, f"under {names}: {why}; one claim can take more rows than its LIMIT. "
                          f"Fix: {shape.advice}"])


def plan_verdict(conn: psycopg.Connection, strategy: Strategy) -> PlanVerdict:
    """Plan the strategy's picking statement against the `jobs` on conn's search_path and judge it.

    Build that table first with :func:`pg_claimcheck.plans.shape.prepare_plan_table` (the shape depends on the data:
    on a table of only ready jobs a Seq Scan is the right plan). Nothing is executed.
    """
    section = strategy.picking_section
    statement = _bound(conn, strategy, section)
    try:
        with conn.transaction(force_rollback=True):
            conn.execute(sql.SQL("SET LOCAL statement_timeout = {}").format(EXPLAIN_TIMEOUT_MS))
            text = "\n".join(r[0] for r in conn.execute(EXPLAIN_PREFIX + statement))
            raw = conn.execute("EXPLAIN (COSTS OFF, FORMAT JSON) " + statement).fetchone()[0]
    except psycopg.Error as exc:
        raise SqlFileError(server_message(strategy, section, 0, exc, statement, len(EXPLAIN_PREFIX),
                                          " when planned")) from None
    tree = json_plan(raw)
    ok, reasons = judge(tree, strategy)
    return PlanVerdict(strategy.name, section, ok, reasons, text)


def _bound(conn: psycopg.Connection, strategy: Strategy, section: str) -> str:
    """The statement with sample values as literals: EXPLAIN plans it as a worker would run it."""
    params = sample_params(strategy, section, **SAMPLE_VALUES, batch=BATCH)
    return ClientCursor(conn).mogrify(strategy.statements[section], params)


def _walk(node: dict, parent: dict | None = None) -> Iterator[tuple[dict, dict | None]]:
    yield node, parent
    for child in node.get("Plans", []):
        yield from _walk(child, node)


def _describe(node: dict) -> str:
    index = f" using {node['Index Name']}" if node.get("Index Name") else ""
    return f"{node['Node Type']}{index} on {node.get('Relation Name', '?')}"


def judge(tree: dict, strategy: Strategy) -> tuple[bool, list[str]]:
    """The verdict from an EXPLAIN (FORMAT JSON) plan tree: LockRows under Limit, jobs via an index."""
    reasons: list[str] = []
    nodes = list(_walk(tree))
    lock_rows = [(n, p) for n, p in nodes if n["Node Type"] == "LockRows"]
    locked_under_limit = [n for n, p in lock_rows if p is not None and p["Node Type"] == "Limit"]
    if locked_under_limit:
        picking = locked_under_limit[0]
        reasons.append("Limit -> LockRows: rows are locked as they are picked, and only up to the limit")
    elif lock_rows:
        picking = lock_rows[0][0]
        reasons.append("LockRows is not directly under a Limit: more rows than the batch may be locked")
    else:
        limits = [n for n, _ in nodes if n["Node Type"] == "Limit"]
        picking = limits[0] if limits else tree
        reasons.append("no LockRows node: rows are picked without a row lock, so two workers can pick the same "
                       "rows (add FOR UPDATE SKIP LOCKED to the SELECT that picks them)")
        if strategy.isolation == "serializable":
            reasons.append("this strategy relies on SERIALIZABLE instead: safe, paid for in retried transactions")
    scans = [n for n, _ in _walk(picking) if n.get("Relation Name") == TABLE and "Scan" in n["Node Type"]]
    seq = [n for n in scans if n["Node Type"] == "Seq Scan"]
    indexed = [n for n in scans if n["Node Type"] in INDEX_ACCESS]
    if seq:
        reasons.append(f"{_describe(seq[0])}: every claim reads the whole table, finished jobs included")
    elif indexed:
        reasons.append(f"ready rows reached through {_describe(indexed[0])}")
    else:
        reasons.append("no scan of jobs found under the picking node")
    return bool(locked_under_limit) and bool(indexed) and not seq, reasons
