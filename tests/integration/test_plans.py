"""Planner conditions on a real server, on small tables: what each condition makes the planner
believe, and the runs they lead to (pg_claimcheck.plans)."""
from pathlib import Path

import pytest

import pg_claimcheck
from pg_claimcheck.contract.strategy import load_strategy
from pg_claimcheck.plans.conditions import NESTED, STALE, build_tables
from pg_claimcheck.plans.explore import plan_under
from pg_claimcheck.server.session import run_schema

CLAIMS = Path(__file__).parents[1] / "plans"
UNSAFE = str(CLAIMS / "in_subquery_skip_locked.sql")
SAFE = str(CLAIMS / "in_subquery_materialized.sql")
OWN = str(CLAIMS / "own_tables_in_subquery.sql")
SMALL = {"workers": 2, "jobs": 200}


@pytest.mark.parametrize("claim", [UNSAFE, OWN], ids=["jobs", "own-tables"])
def test_stale_stats_make_the_planner_believe_a_full_queue_empty(server, claim):
    strategy = load_strategy(claim)
    with run_schema(server) as (conn, run):
        seeded = build_tables(conn, run, strategy, STALE, 50)
        assert seeded.count == 50
        (table,) = [t for t in ("jobs", "outbox") if conn.execute("SELECT to_regclass(%s)", (t,)).fetchone()[0]]
        reltuples, options = conn.execute("SELECT reltuples, reloptions FROM pg_class WHERE oid = %s::regclass",
                                          (table,)).fetchone()
        assert reltuples == 0 and options == ["autovacuum_enabled=off"]
        assert conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 50
        shape = plan_under(run, strategy, STALE, 10, analyze=True)
    assert "Nested Loop" in shape.signature
    assert shape.rescanned and any("ran" in loop for loop in shape.loops)


def test_the_nested_loop_switches_hold_in_the_claims_transaction_only(server):
    strategy = load_strategy(UNSAFE)
    with run_schema(server) as (conn, run):
        build_tables(conn, run, strategy, NESTED, 200)
        assert plan_under(run, strategy, NESTED, 10).rescanned
        with run.connect("after") as after:  # SET LOCAL: nothing is left on any session
            assert after.execute("SHOW enable_hashjoin").fetchone()[0] == "on"
        # The CTE form under the same switches, on the same table: the CTE runs once.
        assert plan_under(run, load_strategy(SAFE), NESTED, 10, analyze=True).runs_once


@pytest.mark.parametrize("claim", [UNSAFE, OWN], ids=["jobs", "own-tables"])
def test_an_in_subquery_claim_fails_under_a_condition_and_says_which(server, claim):
    with pytest.raises(pg_claimcheck.ExactlyOnceViolated) as caught:
        pg_claimcheck.assert_exactly_once(claim, server=server, **SMALL)
    result = caught.value.result
    assert result.condition == "stale-stats" and result.verdict.over_claims >= 1
    message = str(caught.value)
    assert "under the planner condition stale-stats" in message and "Nested Loop" in message
    assert "MATERIALIZED CTE" in message


def test_the_materialized_form_holds_under_the_default_conditions(server):
    result = pg_claimcheck.assert_exactly_once(SAFE, server=server, workers=2, jobs=100)
    assert result.condition == "as-seeded" and result.exactly_once
