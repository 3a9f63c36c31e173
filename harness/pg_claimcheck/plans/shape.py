"""A claim's plan shape, and the dangerous one: a limiting, locking subquery that runs more than once.

`UPDATE … WHERE id IN (SELECT id … LIMIT n FOR UPDATE SKIP LOCKED)` takes `n` rows when the
subquery runs once. When the planner puts it on the inner side of a nested loop (stale statistics
that say the table holds one row, hash and sort methods switched off), it is rescanned once per
outer row, and each rescan skips the rows this statement already changed and locks new ones: one
statement takes far more than `n` jobs (Oban before 2.15, queue_classic PR #320, ecto_job #38,
the outbox DELETE of Stack Overflow 73966670; see docs/plans.md).

A node runs once per execution of the nearest node above it that rescans its child: the inner
side of a Nested Loop (once per outer row) and a SubPlan (once per row it is evaluated for). A
Materialize or Hash node stores its child's rows on the first scan and replays them on a rescan
without new parameters, and a CTE or InitPlan runs once: below those, the subquery runs once.
"""
from __future__ import annotations

import json
from typing import Iterator

import psycopg

from pg_claimcheck.contract.queries import QUERIES
from pg_claimcheck.plans import PLAN_QUERIES
from pg_claimcheck.server.schema import build_jobs_table
from pg_claimcheck.verdict.observed import SeededJobs
from pg_claimcheck.verdict.planshape import PlanShape, rescan_sentence

STORES = ("Materialize", "Hash")
"""Nodes that keep their child's rows: a rescan replays them instead of running the child again."""
ONCE = ("InitPlan", "CTE")
"""Parent relationships of subplans that run once per statement."""
EXPLAIN_TIMEOUT_MS = 10_000
"""statement_timeout of an EXPLAIN (ANALYZE runs the statement: a claim that hangs must not hold us)."""
EXPLAIN_PREFIX = "EXPLAIN (COSTS OFF) "
"""The first EXPLAIN of a statement: a server error's position in it counts these characters first."""
SAMPLE_VALUES = {"worker": "claimcheck-plans", "lease_seconds": 300.0, "ids": [1, 2, 3], "id": 1, "attempts": 1,
                 "error": "claimcheck", "backoff_unit_s": 10.0, "backoff_cap_s": 3600.0}
"""The values an EXPLAINed statement's parameters get (bar `batch`, the caller's)."""
FINISHED_JOBS = 50_000
READY_JOBS = 20
"""The plan guard's table by default (`claimcheck explain`): a queue with a history, see prepare_plan_table."""



def prepare_plan_table(conn: psycopg.Connection, schema: str, finished: int = FINISHED_JOBS,
                       ready: int = READY_JOBS, first_key: int = 1) -> SeededJobs:
    """(Re)build `schema.jobs` as a queue with history: `ready` queued jobs, ids from `first_key`,
    then `finished` done ones after them, analyzed; the ready jobs are the ones seeded."""
    seeded = build_jobs_table(conn, schema, ready, first_key)
    conn.execute(PLAN_QUERIES["seed_finished_jobs"], {"jobs": finished})
    conn.execute(QUERIES["analyze_jobs"])
    return seeded


def from_explain(text: str, tree: dict, analyzed: dict | None = None) -> PlanShape:
    """The shape from EXPLAIN (COSTS OFF)'s text and FORMAT JSON's top `Plan`; `analyzed`, the top
    `Plan` of an EXPLAIN (ANALYZE, FORMAT JSON) of the same statement, adds the loops it measured."""
    loops = () if analyzed is None else tuple(
        f"{_describe(node)} over LockRows ran {node['Actual Loops']} times in one statement"
        for node, path in _walk(analyzed)
        if node["Node Type"] == "Limit" and node.get("Actual Loops", 1) > 1 and _locks_with(node, path))
    opaque = not any(node["Node Type"] == "Limit" for node, _ in _walk(tree))
    locks = any(node["Node Type"] == "LockRows" for node, _ in _walk(tree))
    return PlanShape(signature(tree), text, tuple(rerun_nodes(tree)), loops, opaque, locks)


def json_plan(raw) -> dict:
    """The top `Plan` of an EXPLAIN (FORMAT JSON) result cell (psycopg gives it parsed, or as text)."""
    return (json.loads(raw) if isinstance(raw, str) else raw)[0]["Plan"]


def explain(conn: psycopg.Connection, target: str, analyze: bool = False) -> PlanShape:
    """EXPLAIN `target` (a statement, or `EXECUTE` of a prepared one) on conn, inside the caller's
    transaction; with `analyze`, also EXPLAIN ANALYZE it (which runs it: roll the transaction back)."""
    text = "\n".join(r[0] for r in conn.execute(EXPLAIN_PREFIX + target))
    tree = json_plan(conn.execute("EXPLAIN (COSTS OFF, FORMAT JSON) " + target).fetchone()[0])
    analyzed = None
    if analyze:
        analyzed = json_plan(conn.execute("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, FORMAT JSON) "
                                          + target).fetchone()[0])
    return from_explain(text, tree, analyzed)


def _walk(node: dict, path: tuple[dict, ...] = ()) -> Iterator[tuple[dict, tuple[dict, ...]]]:
    """Every node with the chain of its ancestors, nearest last."""
    yield node, path
    for child in node.get("Plans", []):
        yield from _walk(child, (*path, node))


def _describe(node: dict) -> str:
    relation = f" on {node['Relation Name']}" if node.get("Relation Name") else ""
    return f"{node['Node Type']}{relation}"


def signature(node: dict) -> str:
    """Node types, join types, relations and the relationship to the parent, nested."""
    parts = [node["Node Type"]]
    for key in ("Join Type", "Relation Name", "Subplan Name", "Index Name"):
        if node.get(key):
            parts.append(str(node[key]))
    head = " ".join(parts)
    if node.get("Parent Relationship") in ("InitPlan", "SubPlan"):
        head = f"{node['Parent Relationship']}:{head}"
    children = node.get("Plans", [])
    return head + (f"[{', '.join(signature(c) for c in children)}]" if children else "")


def rescanned_limits(tree: dict) -> list[str]:
    """Each limiting, locking subquery that can run more than once per statement, in words (rerun_nodes)."""
    return [rescan_sentence(by) for by in rerun_nodes(tree)]


def rerun_nodes(tree: dict) -> list[str]:
    """For each limiting, locking subquery that can run more than once per statement: a Limit with a
    LockRows in the same rerun part of the plan (below it, or just above it), with the node that
    reruns it, and no Limit above that node capping what the statement takes (pgqueuer runs a
    locking LATERAL subquery per entrypoint on purpose, under a Limit of the total). A lone LockRows
    run per row (a per-row lock of another table, in a SubPlan) takes no more rows than asked for,
    and a lone Limit run again without locks finds the same rows. Each is named by the node that reruns it."""
    found = []
    for node, path in _walk(tree):
        if node["Node Type"] != "Limit" or not _locks_with(node, path):
            continue
        rerun = _rerun_by(node, path)
        if rerun is not None and not _capped(path[:rerun[1] + 1]):
            found.append(rerun[0])
    return found


def _locks_with(limit: dict, path: tuple[dict, ...]) -> bool:
    """A LockRows below the Limit (not past a node that runs once or stores rows), or its parent."""
    below = any(n["Node Type"] == "LockRows" for n in _same_run(limit))
    return below or bool(path and path[-1]["Node Type"] == "LockRows")


def _same_run(node: dict) -> Iterator[dict]:
    """The node and its descendants that run each time it does."""
    yield node
    for child in node.get("Plans", []):
        if child.get("Parent Relationship") not in ONCE and child["Node Type"] not in STORES:
            yield from _same_run(child)


def _rerun_by(node: dict, path: tuple[dict, ...]) -> tuple[str, int] | None:
    """The ancestor that runs `node` again (in words, and its place in `path`), or None when
    nothing between them keeps its rows."""
    child = node
    for at in range(len(path) - 1, -1, -1):
        parent, relationship = path[at], child.get("Parent Relationship")
        if child["Node Type"] in STORES or relationship in ONCE:
            return None
        if relationship == "SubPlan":
            return f"a SubPlan of {parent['Node Type']} (evaluated per row)", at
        if parent["Node Type"] == "Nested Loop" and relationship == "Inner":
            join = f" {parent['Join Type']}" if parent.get("Join Type") else ""
            return f"the inner side of a Nested Loop{join}", at
        child = parent
    return None


def _capped(path: tuple[dict, ...]) -> bool:
    """A Limit at or above the last node of `path`, in the same part of the plan (up to the root of
    the CTE or InitPlan it is in): the statement takes no more rows than that Limit."""
    for node in reversed(path):
        if node["Node Type"] == "Limit":
            return True
        if node.get("Parent Relationship") in ONCE:
            return False
    return False
