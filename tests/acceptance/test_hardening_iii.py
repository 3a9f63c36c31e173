"""Issue 35 and issue 34's file-contract items: the SQL judged is the SQL written, errors keep their
line and cause, options that mean nothing are refused, nothing of a killed run is left for ever."""
from __future__ import annotations

import pytest

TYPO = """-- isolation: read committed
-- name: claim
WITH next AS (SELECT id FROM jobs WHERE status = 'queued' ORDER BY id LIMIT %(batch)s
              FOR UPDATE SKIP LOCKED)
UPDATE jobs j SET status = 'running', attempts = j.attemp + 1 FROM next WHERE j.id = next.id
RETURNING j.id, j.attempts;
"""


@pytest.mark.parametrize("plans", ["default", "none"])
def test_a_typo_in_the_claim_gets_its_line_and_hint_with_or_without_planner_conditions(cli, plans):
    # With the conditions on (the default), it read "cannot be planned under as-seeded: column j.attemp
    # does not exist": no line, no hint.
    (cli.scratch / "typo.sql").write_text(TYPO)
    done = cli("check", "typo.sql", "--jobs", "100", "--workers", "2", "--plans", plans)
    assert done.code == 2, done.stderr
    assert ("typo.sql:5: section 'claim' fails on the server: column j.attemp does not exist" in done.stderr
            and 'Hint: Perhaps you meant to reference the column "j.attempts"' in done.stderr), done.stderr
    cli.assert_nothing_left()


SOME_FAIL = """-- name: claim
WITH next AS (SELECT id FROM jobs WHERE status = 'queued' ORDER BY id LIMIT %(batch)s
              FOR UPDATE SKIP LOCKED)
UPDATE jobs j SET status = 'running', attempts = j.attempts + 1 FROM next WHERE j.id = next.id
RETURNING j.id, j.attempts;
-- name: complete
UPDATE jobs SET status = 'done'
WHERE id = %(id)s AND 1 / (CASE WHEN id %% 50 = 7 AND id > (SELECT min(id) FROM jobs) THEN 0 ELSE 1 END) = 1;
"""
"""Fails for every 50th job, never the first: validation completes the first job it claims, and this
file must pass validation to fail at run time (the run's keys start anywhere)."""


def test_a_completion_that_fails_at_run_time_names_the_servers_message_and_its_line(cli):
    # It ended "worker 0: RuntimeError: completion of job 3662... failed 100 times in a row": no
    # server message, no file, no section.
    (cli.scratch / "some_fail.sql").write_text(SOME_FAIL)
    done = cli("check", "some_fail.sql", "--jobs", "200", "--workers", "2", "--plans", "none")
    assert done.code == 2, done.stderr
    assert "some_fail.sql:7: section 'complete' fails on the server for job " in done.stderr, done.stderr
    assert "100 times in a row: division by zero [22012]" in done.stderr, done.stderr
    assert "RuntimeError" not in done.stderr and "Traceback" not in done.stderr
    cli.assert_nothing_left()


def test_a_pool_size_above_max_connections_is_refused(cli):
    # --pool-size 100000 was accepted against max_connections 40: a pool that can never be filled.
    done = cli("check", "skip-locked", "--jobs", "50", "--workers", "2", "--pooler", "pgbouncer", "--pool-size", "100000")
    assert done.code == 2, done.stderr
    assert "--pool-size 100000 is more than the server's max_connections" in done.stderr, done.stderr
    cli.assert_nothing_left()


def _dead_owners_directory(parent, prefix: str):
    """A directory as a SIGKILLed run of ours leaves it: its owner record names a process that is gone."""
    import json
    import socket
    import subprocess
    import sys
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    directory = parent / f"{prefix}x1y2z3"
    directory.mkdir()
    (directory / "owner.json").write_text(json.dumps({"pid": gone.pid, "host": socket.gethostname(), "started": 1}))
    (directory / "w00.tsv").write_text("records\n")
    return directory


def test_a_later_run_of_any_verb_sweeps_a_killed_lib_or_pooler_runs_directory(cli):
    # A killed `lib` run's records directory was never swept, and a killed --pooler run's PgBouncer
    # directory only by a later --pooler run.
    left = [_dead_owners_directory(cli.scratch, "claimcheck-lib-t0-"),
            _dead_owners_directory(cli.scratch, "claimcheck-pgbouncer-")]
    done = cli("check", "skip-locked", "--jobs", "50", "--workers", "2", "--plans", "none")
    assert done.code == 0, done.stderr
    assert not [d for d in left if d.exists()], done.stderr
    said = " ".join(done.stderr.split())
    assert all(f"swept {d}" in said for d in left), done.stderr  # (and maybe what other dead runs left in /tmp)
