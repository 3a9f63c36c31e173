"""The planner conditions in the reports: the JSON schema takes them, the HTML and the terminal show
each condition's plan, verdict and evidence (built by hand, no server)."""
from rich.console import Console

from pg_claimcheck.plans.conditions import AS_SEEDED, STALE
from pg_claimcheck.plans.explore import ConditionOutcome
from pg_claimcheck.plans.shape import from_explain
from pg_claimcheck.plans.table import conditions_table
from pg_claimcheck.report.html import render
from sample_reports import assert_valid_report, report, run_object

PLAN = ["Update on jobs", "  ->  Nested Loop Semi Join", "        ->  Seq Scan on jobs",
        "        ->  Subquery Scan on \"ANY_subquery\"", "              ->  Limit", "                    ->  LockRows"]


def condition(name: str, verdict: str, **changes) -> dict:
    entry = {"condition": name, "summary": f"what {name} is", "settings": {}, "verdict": verdict, "same_as": None,
             "note": None, "setting": "lease 4w batch 10", "seconds": 0.2, "evidence": [], "advice": None,
             "shape": "ModifyTable jobs[…]", "plan": PLAN, "rescanned_limit": [], "limit_loops": []}
    return {**entry, **changes}


def test_a_report_with_conditions_follows_the_schema_and_the_html_shows_them():
    doc = report(run_object("mine", 4, 100.0, False, condition="stale-stats",
                            condition_plan={"shape": "s", "plan": PLAN, "rescanned_limit": ["Limit below …"],
                                            "limit_loops": []}),
                 run_object("mine", 4, 100.0, True, condition="as-seeded"))
    doc["schema_version"] = 2
    doc["conditions"] = [
        condition("stale-stats", "VIOLATED", evidence=["over-claim: 1 claim(s) took more rows than the limit, up to "
                                                       "50 rows for LIMIT 10"],
                  rescanned_limit=["Limit below the inner side of a Nested Loop Semi: …"], advice="use a CTE"),
        condition("generic-plan", "skipped", same_as="as-seeded"),
        condition("history", "not applicable", note="needs claimcheck's jobs table", shape=None, plan=[]),
        condition("as-seeded", "held")]
    assert_valid_report(doc)
    html = render(doc)
    section = html[html.index("<h2>Planner conditions</h2>"):]
    assert "✗ VIOLATED" in section and "50 rows for LIMIT 10" in section and "use a CTE" in section
    assert "skipped (plan of as-seeded)" in section and "Nested Loop Semi Join" in section
    assert "mine · stale-stats" in html  # the charts label a run by what tells it from the others


def test_the_terminal_table_names_each_condition_its_plan_and_verdict():
    rescanned = from_explain("\n".join(PLAN), {"Node Type": "ModifyTable", "Plans": [
        {"Node Type": "Nested Loop", "Join Type": "Semi", "Plans": [
            {"Node Type": "Seq Scan", "Parent Relationship": "Outer"},
            {"Node Type": "Limit", "Parent Relationship": "Inner", "Plans": [
                {"Node Type": "LockRows", "Parent Relationship": "Outer"}]}]}]})
    outcomes = [ConditionOutcome(STALE, rescanned, "VIOLATED", setting="lease 4w batch 10"),
                ConditionOutcome(AS_SEEDED, rescanned, "skipped", same_as="stale-stats", setting="lease 4w batch 10")]
    console = Console(width=200, record=True)
    console.print(conditions_table(outcomes, "title"))
    text = console.export_text()
    assert "stale-stats" in text and "VIOLATED" in text and "skipped (plan of stale-stats)" in text
    assert "Limit below the inner side of a Nested Loop Semi: runs per row" in text
    assert "setting" not in text  # one setting: no column for it


def test_an_over_claim_under_a_condition_names_the_limit_it_was_judged_against():
    # A claim writing its own LIMIT 100, run at --batch 10: 120 rows is judged against 100, and the
    # evidence said "a batch of 10".
    import dataclasses

    from pg_claimcheck.contract.strategy import Strategy
    from pg_claimcheck.engine.sampler import WaitSamples
    from pg_claimcheck.server.schema import SeededJobs
    from pg_claimcheck.settings import RunSettings
    from pg_claimcheck.verdict.ledger import DONE, WorkerLog, judge
    from pg_claimcheck.verdict.result import RunResult, TableOutcome

    log = WorkerLog(worker=0)
    log.record(1, 1, 0.1, 0.2, DONE)
    verdict = judge([log], 1, 1, drained=True)
    over = ({"kind": "over-claim", "worker": 0, "claimed_at_s": 0.1, "rows": 120, "limit": 100, "jobs": [1]},)
    run = RunResult(
        strategy=Strategy(name="mine", statements={"claim": "UPDATE q SET s = 1 WHERE id IN (SELECT id FROM q "
                                                            "LIMIT 100 FOR UPDATE SKIP LOCKED) RETURNING id"}),
        settings=RunSettings(workers=1, jobs=1, batch=10), seeded=SeededJobs(1, 1, 1, 0.01),
        verdict=dataclasses.replace(verdict, over_claims=1, shape_evidence=over), waits=WaitSamples(),
        table=TableOutcome(done=1, queued=0, running=0, failed=0, max_attempts=1), elapsed_s=0.5,
        stopped_by="drained", claim_latency_ms={"p50": 1.0, "p95": 1.0, "p99": 1.0, "max": 1.0},
        serialization_failures=0, deadlocks=0, claim_statements=1)
    outcome = ConditionOutcome(STALE, None, "VIOLATED", result=run)
    assert outcome.evidence() == ["over-claim: 1 claim(s) took more rows than the limit, up to 120 rows for "
                                  "LIMIT 100 (the LIMIT written in the claim)"]
