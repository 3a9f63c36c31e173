"""A worker whose statement never returns: the no-progress rule ends the run (a failure), naming
the worker, its backend, state and wait event, and for how long; nothing is left sleeping on the
server (issue 25). The stall limit is shortened to keep the tests quick."""
from __future__ import annotations

import psycopg
import pytest

from pg_claimcheck.engine import supervisor

SLEEP = "pg_sleep(CASE WHEN %(worker)s = 'w01' THEN 3600 ELSE 0 END)"
CLAIM = """-- name: claim
WITH next AS (
    SELECT id FROM jobs WHERE status = 'queued' ORDER BY id LIMIT %(batch)s FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE jobs j SET status = 'running', attempts = j.attempts + 1
    FROM next WHERE j.id = next.id RETURNING j.id, j.attempts
)
SELECT c.id, c.attempts FROM claimed c{sleep};
"""
COMPLETE = """-- name: complete
UPDATE jobs SET status = 'done' WHERE id = %(id)s AND attempts = %(attempts)s AND status = 'running'{sleep};
"""
FILES = {
    # w01 sleeps inside its claim, holding its 10 rows: the others claim the rest, then nothing.
    # (The sleep is per claimed row: an uncorrelated one may be planned before the rows are locked.)
    "claim": CLAIM.format(sleep=f", LATERAL (SELECT {SLEEP} WHERE c.id IS NOT NULL) s") + COMPLETE.format(sleep=""),
    # w01 claimed and sleeps inside its completion.
    "complete": CLAIM.format(sleep="") + COMPLETE.format(sleep=f" AND {SLEEP} IS NOT NULL"),
}


@pytest.mark.parametrize("where", sorted(FILES))
def test_a_worker_stuck_in_a_statement_ends_the_run_as_no_progress_naming_it(run, server, tmp_path, monkeypatch,
                                                                             where):
    monkeypatch.setattr(supervisor, "STALL_TIMEOUT_S", 1.0)
    path = tmp_path / f"stuck_{where}.sql"
    path.write_text(FILES[where])
    result = run(str(path), workers=4, jobs=100, batch=10)
    assert result.stopped_by == "no-progress" and not result.exactly_once
    reason = result.stop_reason
    # The no-progress rule (its stall limit, 1 s here) ended the run and terminated the backend: not the
    # sleep's hour, nor a kill long after (the 310 s it once took).
    assert reason.startswith("no job was finished for "), reason
    assert "worker w01 (backend pid " in reason and "has been active for" in reason, reason
    assert "wait event Timeout/PgSleep" in reason, reason
    assert "its backend was terminated" in reason
    assert result.as_dict()["stop_reason"] == reason
    if where == "claim":  # its 10 rows were never claimed: not lost, never reached
        assert result.verdict.unreached_jobs == 10 and result.verdict.unclaimed_jobs == 0
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        sleeping = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep' "
                                "AND query LIKE '%%w01%%3600%%'").fetchone()[0]
    assert sleeping == 0


def test_a_stuck_claim_never_hangs_a_planner_condition(server, tmp_path, monkeypatch):
    """Issue 31, item 5: under planner conditions (each a short run stopped at its slice of the budget)
    a claim asleep for an hour hung `check` (the same file ended in 37 s with `--plans none`). Each
    condition's run now ends its stuck worker's backend a grace after its stop, and says so: no
    progress (a liveness failure), naming the worker, not a violation."""
    import pg_claimcheck
    from pg_claimcheck.engine import driver

    monkeypatch.setattr(driver, "STOP_GRACE_S", 1.0)
    path = tmp_path / "stuck_claim.sql"
    path.write_text(FILES["claim"])
    result = pg_claimcheck.run(str(path), server=server, plans="default", workers=4, batch=10, budget_s=8)
    # Ended at the condition's stop (its slice of the budget) and a grace after: not the sleep's hour.
    assert result.condition is not None and result.outcome == "no-progress" and not result.violated
    assert "the run's time was up" in result.liveness and "worker w01 (backend pid " in result.liveness
    assert "its backend was terminated" in result.liveness
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        sleeping = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep' "
                                "AND query LIKE '%%w01%%3600%%'").fetchone()[0]
    assert sleeping == 0
