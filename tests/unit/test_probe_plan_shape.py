"""The plan guard's judgement, on hand-built EXPLAIN (FORMAT JSON) trees."""
from pg_claimcheck.contract.strategy import Strategy
from pg_claimcheck.probes.explain import judge

SKIP_LOCKED = Strategy(name="x", statements={"claim": "..."})
SERIALIZABLE = Strategy(name="s", statements={"claim": "..."}, isolation="serializable")


def node(kind: str, *children: dict, **fields) -> dict:
    return {"Node Type": kind, **fields, **({"Plans": list(children)} if children else {})}


def ready_index_scan() -> dict:
    return node("Index Scan", **{"Relation Name": "jobs", "Index Name": "jobs_ready_idx"})


def update_over(pick: dict) -> dict:
    """Seed 003's shape: Update, the CTE's plan as an InitPlan, a nested loop back to jobs by id."""
    return node("ModifyTable", pick, node("Nested Loop", node("CTE Scan"),
                                          node("Index Scan", **{"Relation Name": "jobs", "Index Name": "jobs_pkey"})))


def test_seed_003_shape_holds():
    ok, reasons = judge(update_over(node("Limit", node("LockRows", ready_index_scan()))), SKIP_LOCKED)
    assert ok
    assert any("Limit -> LockRows" in r for r in reasons)
    assert any("Index Scan using jobs_ready_idx on jobs" in r for r in reasons)


def test_no_lock_rows_fails_even_through_an_index():
    ok, reasons = judge(update_over(node("Limit", ready_index_scan())), SKIP_LOCKED)
    assert not ok
    assert any("no LockRows node" in r for r in reasons)


def test_seq_scan_of_jobs_under_the_lock_fails():
    ok, reasons = judge(node("Limit", node("LockRows", node("Sort", node("Seq Scan", **{"Relation Name": "jobs"})))),
                        SKIP_LOCKED)
    assert not ok
    assert any(r.startswith("Seq Scan on jobs") for r in reasons)


def test_lock_rows_above_the_limit_fails():
    ok, reasons = judge(node("LockRows", node("Limit", ready_index_scan())), SKIP_LOCKED)
    assert not ok
    assert any("not directly under a Limit" in r for r in reasons)


def test_bitmap_heap_scan_counts_as_an_index():
    bitmap = node("Bitmap Heap Scan", node("Bitmap Index Scan", **{"Index Name": "jobs_ready_idx"}),
                  **{"Relation Name": "jobs"})
    ok, _ = judge(node("Limit", node("LockRows", node("Sort", bitmap))), SKIP_LOCKED)
    assert ok


def test_serializable_claim_is_told_why_it_has_no_lock():
    ok, reasons = judge(node("Limit", ready_index_scan()), SERIALIZABLE)
    assert not ok
    assert any("SERIALIZABLE" in r for r in reasons)
