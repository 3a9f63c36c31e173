"""The planner conditions in the reports: the JSON schema takes them, the HTML and the terminal show
each condition's plan, verdict and evidence (built by hand, no server)."""
from rich.console import Console

from claimcheck.plans.conditions import AS_SEEDED, STALE
from claimcheck.plans.explore import ConditionOutcome
from claimcheck.plans.shape import from_explain
from claimcheck.report.html import render
from claimcheck.report.plans import conditions_table
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
    assert "mine · lease · b10 · 4w · under stale-stats" in html


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
