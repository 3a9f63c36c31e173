"""Time to a verdict, on a real server: a `check` stops once a violation is proven, a queue that
makes no progress is ended with a failing verdict, and finished jobs are counted from the ledger
(a queue that deletes what it finished is counted too). Small runs: the point is the verdict."""
from pathlib import Path

import pytest

from pg_claimcheck.engine import supervisor

SMALL = dict(workers=4, jobs=1_000, batch=5)

SKIP_LOCKED_CTE = """\
WITH next AS (
    SELECT id FROM jobs WHERE status = 'queued' ORDER BY id LIMIT %(batch)s FOR UPDATE SKIP LOCKED
)
"""
DELETE_RETURNING = "-- name: claim\n" + SKIP_LOCKED_CTE + "DELETE FROM jobs j USING next WHERE j.id = next.id RETURNING j.id;\n"
COMPLETE_NEVER_MATCHES = ("-- name: claim\n" + SKIP_LOCKED_CTE +
                          "UPDATE jobs j SET status = 'running', attempts = j.attempts + 1 FROM next "
                          "WHERE j.id = next.id RETURNING j.id, j.attempts;\n"
                          "-- name: complete\n"
                          "UPDATE jobs SET status = 'done' WHERE id = %(id)s AND status = 'queued';\n")
SELECT_ONLY = ("-- name: claim\n"
               "SELECT id, attempts FROM jobs WHERE status = 'queued' ORDER BY id LIMIT %(batch)s;\n")


def sql_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "claim.sql"
    path.write_text(text)
    return str(path)


def test_an_unsafe_check_stops_at_the_first_proven_double_claim(run):
    result = run("naive-single", **SMALL, stop_early=True)
    v = result.verdict
    assert result.stopped_by == "violation" and result.stopped_early
    # Either proof may come first: the second claim itself, or the first claimer's completion that
    # the second claim fenced off (it changed no row, and nothing had released the claim).
    assert "claimed a second time" in result.stop_reason or "changed no row" in result.stop_reason
    assert v.double_claimed_jobs > 0 and v.violations and not result.exactly_once
    assert not v.drained  # jobs the run never reached are not called lost
    assert v.unique_jobs_claimed < 1_000, "it should stop before the drain"


def test_a_safe_check_with_early_stop_still_drains(run):
    result = run("skip-locked", **SMALL, stop_early=True)
    assert result.stopped_by == "drained" and result.exactly_once
    assert result.jobs_done == 1_000


def test_early_stop_is_off_where_claims_can_be_released(run):
    """With a reaper, a re-claim may be a redelivery whose release is not known yet: drain."""
    result = run("skip-locked", **SMALL, stop_early=True, reap_every_s=0.5)
    assert result.stopped_by == "drained" and result.exactly_once


def test_a_queue_that_deletes_what_it_finished_counts_its_done_jobs(run, tmp_path):
    result = run(sql_file(tmp_path, DELETE_RETURNING), **SMALL)
    assert result.exactly_once, result.verdict.violations[:3]
    assert result.table.done == 0  # nothing left in the table ...
    assert result.jobs_done == 1_000 and result.throughput_jobs_per_s > 0  # ... yet every job finished
    assert result.as_dict()["jobs_done"] == 1_000


def test_a_complete_that_never_changes_a_row_fails_the_run(run, tmp_path):
    result = run(sql_file(tmp_path, COMPLETE_NEVER_MATCHES), **SMALL)
    v = result.verdict
    assert result.stopped_by == "drained" and v.double_claimed_jobs == 0
    assert v.never_finished == 1_000 and result.jobs_done == 0
    assert not result.exactly_once
    assert v.violations[0].kind == "never-finished"


def test_a_complete_that_never_changes_a_row_stops_a_check_at_once(run, tmp_path):
    result = run(sql_file(tmp_path, COMPLETE_NEVER_MATCHES), workers=2, jobs=20_000, batch=1, stop_early=True)
    assert result.stopped_by == "violation" and "changed no row" in result.stop_reason
    assert not result.exactly_once and result.verdict.never_finished > 0


def test_a_claim_that_takes_nothing_ends_as_no_progress(run, tmp_path, monkeypatch):
    """It hands out the same jobs forever without finishing new ones: the run must end, and fail."""
    monkeypatch.setattr(supervisor, "STALL_TIMEOUT_S", 1.0)
    result = run(sql_file(tmp_path, SELECT_ONLY), workers=2, jobs=200, batch=5, poll_ms=1)
    assert result.stopped_by == "no-progress"
    assert "no job was finished" in result.stop_reason
    assert not result.exactly_once


@pytest.mark.parametrize("stop_early", [True, False])
def test_the_api_and_the_cli_share_the_verdict(run, stop_early):
    result = run("naive-subquery", **SMALL, stop_early=stop_early)
    assert result.as_dict()["exactly_once"] is result.exactly_once is False


def test_a_run_stopped_at_its_proof_does_not_report_jobs_it_never_reached_as_unclaimed(run):
    # `check naive-subquery` showed `unclaimed_jobs: 4710` in the table and JSON.
    result = run("naive-single", **SMALL, stop_early=True)
    v, data = result.verdict, result.as_dict()
    assert result.stopped_by == "violation"
    assert v.unclaimed_jobs == 0 and data["unclaimed_jobs"] == 0
    assert v.unreached_jobs == data["unreached_jobs"] == 1_000 - (v.unique_jobs_claimed - v.unexpected_jobs) > 0


@pytest.mark.parametrize("limit", [dict(duration_s=100.0), dict(claims_per_worker=10_000)])
def test_a_run_with_a_limit_ends_at_the_drain_when_its_queue_drains_first(run, limit):
    # `--duration 100 --jobs 100` drained in 0.02 s, then ran 30 s and ended "stalled".
    result = run("skip-locked", workers=2, jobs=100, **limit)
    assert result.stopped_by == "drained"  # not "stalled" after a wait, nor the limit: how long it took is no test and result.exactly_once and result.jobs_done == 100
    assert result.verdict.drained and result.verdict.unclaimed_jobs == 0
