"""Planner conditions as a user meets them: a plain `check` of an IN-subquery claim fails and names
the condition and its plan, its MATERIALIZED form holds, and `explain` tells the two apart."""
import json
from pathlib import Path

from pg_claimcheck.report.validation import SCHEMA_VERSION

CLAIMS = Path(__file__).parents[1] / "plans"
UNSAFE = str(CLAIMS / "in_subquery_skip_locked.sql")
SAFE = str(CLAIMS / "in_subquery_materialized.sql")
SMALL = ["--workers", "4", "--jobs", "300"]
TINY = ["--workers", "2", "--jobs", "100"]


def test_a_plain_check_catches_the_rescanned_subquery_and_names_the_condition(cli):
    out = cli.scratch / "check.json"
    result = cli("check", UNSAFE, *SMALL, "--json", str(out))  # the CLI fixture validates the JSON's schema
    assert result.code == 1, result.stderr
    assert "VIOLATED under stale-stats" in result.stdout and "Nested Loop Semi Join" in result.stdout
    assert "MATERIALIZED CTE" in result.stdout
    doc = json.loads(out.read_text())
    assert doc["schema_version"] == SCHEMA_VERSION
    (failed,) = [c for c in doc["conditions"] if c["verdict"] == "VIOLATED"]
    assert failed["condition"] == "stale-stats" and failed["rescanned_limit"]
    assert any("rows for LIMIT 10" in line for line in failed["evidence"])
    assert {c["verdict"] for c in doc["conditions"][1:]} == {"not run"}  # stopped at the proven violation
    (run,) = doc["runs"]
    assert run["condition"] == "stale-stats" and run["over_claims"] >= 1 and run["condition_plan"]["shape"]
    cli.assert_nothing_left()


def test_the_materialized_form_holds_under_every_condition_and_plans_none_is_the_old_run(cli):
    out = cli.scratch / "check.json"
    result = cli("check", SAFE, *TINY, "--plans", "all", "--json", str(out))
    assert result.code == 0, result.stderr
    doc = json.loads(out.read_text())
    verdicts = {c["condition"]: c["verdict"] for c in doc["conditions"]}
    assert set(verdicts.values()) <= {"held", "skipped"} and verdicts["as-seeded"] == "held"
    assert all(r["exactly_once"] for r in doc["runs"]) and len(doc["runs"]) == list(verdicts.values()).count("held")
    plain = cli("check", SAFE, *TINY, "--plans", "none", "--json", str(out))
    assert plain.code == 0 and "planner conditions" not in plain.stdout
    doc = json.loads(out.read_text())
    assert "conditions" not in doc and [r["condition"] for r in doc["runs"]] == [None]
    cli.assert_nothing_left()


def test_explain_fails_the_in_subquery_claim_and_passes_its_cte_form(cli):
    out = cli.scratch / "explain.json"
    unsafe = cli("explain", UNSAFE, "--finished", "500", "--json", str(out))
    assert unsafe.code == 1, unsafe.stderr
    assert "SHAPE FAILS" in unsafe.stdout and "MATERIALIZED CTE" in unsafe.stdout
    (plan,) = json.loads(out.read_text())["plans"]
    assert not plan["shape_ok"] and any(c["rescanned_limit"] for c in plan["conditions"])
    safe = cli("explain", SAFE, "--finished", "500")
    assert safe.code == 0, safe.stdout
    assert "runs once per statement under every planner condition" in safe.stdout
    cli.assert_nothing_left()
