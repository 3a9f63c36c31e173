"""The dangerous plan shape on hand-built EXPLAIN (FORMAT JSON) trees: a limiting, locking subquery
that can run more than once per statement (pg_claimcheck.plans.shape)."""
from pg_claimcheck.plans.shape import from_explain, rescanned_limits, signature


def node(kind: str, *children: dict, **fields) -> dict:
    return {"Node Type": kind, **fields, **({"Plans": list(children)} if children else {})}


def limit(relationship: str = "Subquery") -> dict:
    return node("Limit", node("LockRows", node("Index Scan", **{"Relation Name": "jobs", "Parent Relationship": "Outer"}),
                              **{"Parent Relationship": "Outer"}), **{"Parent Relationship": relationship})


def semi_join(inner: dict) -> dict:
    """Oban 2.14's claim on a table the planner believes holds one row (issue 22's measurement)."""
    inner = {**inner, "Parent Relationship": "Inner"}
    return node("ModifyTable", node("Nested Loop", node("Seq Scan", **{"Relation Name": "jobs",
                                                                        "Parent Relationship": "Outer"}),
                                    inner, **{"Join Type": "Semi", "Parent Relationship": "Outer"}),
                **{"Relation Name": "jobs"})


def test_a_limit_on_the_inner_side_of_a_nested_loop_is_rescanned():
    (found,) = rescanned_limits(semi_join(node("Subquery Scan", limit())))
    assert found.startswith("Limit below the inner side of a Nested Loop Semi")


def test_a_materialize_or_hash_between_keeps_its_rows():
    for store in ("Materialize", "Hash"):
        assert rescanned_limits(semi_join(node(store, node("Subquery Scan", limit(), **{"Parent Relationship": "Outer"})))) == []


def test_a_cte_runs_once_whatever_scans_it():
    cte = {**limit(), "Parent Relationship": "InitPlan", "Subplan Name": "CTE picked"}
    tree = semi_join(node("CTE Scan"))
    tree["Plans"].insert(0, cte)
    assert rescanned_limits(tree) == []


def test_the_outer_side_runs_once():
    tree = node("ModifyTable", node("Nested Loop", node("Subquery Scan", limit(), **{"Parent Relationship": "Outer"}),
                                    node("Index Scan", **{"Relation Name": "jobs", "Parent Relationship": "Inner"})))
    assert rescanned_limits(tree) == []


def test_a_subplan_is_evaluated_per_row():
    tree = node("ModifyTable", node("Seq Scan", {**limit(), "Parent Relationship": "SubPlan"},
                                    **{"Relation Name": "jobs", "Parent Relationship": "Outer"}))
    (found,) = rescanned_limits(tree)
    assert "SubPlan" in found


def test_the_signature_ignores_costs_and_sees_the_join():
    a = semi_join(node("Subquery Scan", limit()))
    b = semi_join(node("Subquery Scan", limit()))
    b["Plans"][0]["Total Cost"] = 12.5
    assert signature(a) == signature(b)
    hashed = node("ModifyTable", node("Hash Join", node("Seq Scan"), node("Hash", node("Subquery Scan", limit()))))
    assert signature(hashed) != signature(a)


def test_loops_measured_under_explain_analyze():
    analyzed = semi_join(node("Subquery Scan", {**limit(), "Actual Loops": 41}))
    shape = from_explain("text", semi_join(node("Materialize", limit())), analyzed)
    assert shape.rescanned == () and shape.loops == ("Limit over LockRows ran 41 times in one statement",)
    assert not shape.runs_once


def test_a_per_row_lock_or_an_unlocked_limit_rerun_takes_no_more_rows():
    """graphile-worker 0.17 locks each job's queue row in a SubPlan: a LockRows per row, no limit.
    A Limit without a lock, rescanned, finds the same rows again."""
    queue_lock = node("LockRows", node("Seq Scan", **{"Relation Name": "job_queues", "Parent Relationship": "Outer"}),
                      **{"Parent Relationship": "SubPlan"})
    tree = node("ModifyTable", node("Seq Scan", queue_lock, **{"Relation Name": "jobs", "Parent Relationship": "Outer"}))
    unlocked = node("Limit", node("Index Scan", **{"Relation Name": "jobs", "Parent Relationship": "Outer"}))
    analyzed = semi_join(node("Subquery Scan", {**unlocked, "Actual Loops": 41}))
    assert rescanned_limits(tree) == [] and rescanned_limits(analyzed) == []
    assert from_explain("text", analyzed, analyzed).runs_once


def test_a_limit_of_the_total_above_the_loop_caps_what_one_statement_takes():
    """pgqueuer 1.3: a locking LATERAL subquery per entrypoint, under a Limit of the whole pick."""
    loop = semi_join(node("Subquery Scan", limit()))["Plans"][0]
    capped = node("Limit", {**loop, "Parent Relationship": "Outer"}, **{"Parent Relationship": "InitPlan",
                                                                      "Subplan Name": "CTE next_queued"})
    assert rescanned_limits(node("ModifyTable", capped, node("CTE Scan"))) == []
