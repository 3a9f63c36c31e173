"""The plan guard for every built-in strategy, on a queue with history (50,000 done + 20 ready)."""
import pytest
from pg_claimcheck.scenarios import builtin_names

from pg_claimcheck.contract.strategy import load_strategy
from pg_claimcheck.errors import SqlFileError
from pg_claimcheck.plans.shape import prepare_plan_table
from pg_claimcheck.probes.explain import plan_verdict
from pg_claimcheck.server.session import run_schema

# skip-locked-unfenced claims like skip-locked: its flaw is in the completion, not the plan.
LOCKING_CLAIMS = {"for-update", "skip-locked", "skip-locked-done", "skip-locked-unfenced"}


@pytest.fixture(scope="module")
def planned(server):
    with run_schema(server) as (conn, run):
        prepare_plan_table(conn, run.schema)
        yield conn


@pytest.mark.parametrize("name", builtin_names())
def test_builtin_plan_shape(planned, name):
    verdict = plan_verdict(planned, load_strategy(name))
    assert verdict.shape_ok is (name in LOCKING_CLAIMS), (verdict.reasons, verdict.plan)
    if verdict.shape_ok:
        assert "LockRows" in verdict.plan and "jobs_ready_idx" in verdict.plan
    else:
        assert "LockRows" not in verdict.plan
        assert any("no LockRows node" in r for r in verdict.reasons)


def test_a_claim_that_scans_the_whole_table_fails(planned, tmp_path):
    path = tmp_path / "seq.sql"
    path.write_text("-- name: claim\nWITH next AS (SELECT id FROM jobs WHERE status <> 'done' ORDER BY created_at "
                    "LIMIT %(batch)s FOR UPDATE SKIP LOCKED)\nUPDATE jobs j SET status = 'running' FROM next "
                    "WHERE j.id = next.id RETURNING j.id\n")
    verdict = plan_verdict(planned, load_strategy(str(path)))
    assert not verdict.shape_ok
    assert any(r.startswith("Seq Scan on jobs") for r in verdict.reasons), verdict.plan


def test_a_claim_the_server_cannot_plan_is_bad_input(planned, tmp_path):
    path = tmp_path / "bad.sql"
    path.write_text("-- name: claim\nUPDATE jobs SET nope = 1 RETURNING id\n")
    with pytest.raises(SqlFileError, match='column "nope"'):
        plan_verdict(planned, load_strategy(str(path)))
