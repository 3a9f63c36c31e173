"""A completion fenced by a column the claim returned (docs/contracts.md, section 1), on the real server."""
from pathlib import Path

import pytest

from pg_claimcheck.errors import SqlFileError
from pg_claimcheck.settings import FaultPlan, WorkTime

EXAMPLE = Path(__file__).parents[1] / "examples" / "claim_token_fence.sql"
# Our jobs table, its completion fenced by the lease end the claim wrote rather than by the attempt:
# a lone claim and a lone complete, which the fork driver sends through libpq's prepared statements.
LOCKED_UNTIL = """
-- name: claim
WITH next AS (SELECT id FROM jobs WHERE status = 'queued' ORDER BY id LIMIT %(batch)s FOR UPDATE SKIP LOCKED)
UPDATE jobs j SET status = 'running', attempts = j.attempts + 1,
                  locked_until = now() + make_interval(secs => %(lease_seconds)s)
FROM next WHERE j.id = next.id
RETURNING j.id, j.attempts, j.locked_until;
-- name: complete
UPDATE jobs SET status = 'done', locked_until = NULL
WHERE id = %(id)s AND status = 'running' AND locked_until = %(locked_until)s;
"""


def test_a_token_fenced_acknowledgement_holds_under_faults(run):
    # As the id + attempts fence does (test_faults' visibility timeout): a stalled worker's late
    # acknowledgement carries the token of a claim that another has since replaced, and changes nothing.
    result = run(str(EXAMPLE), faults=FaultPlan(kills=1, terminates=1, stalls=2, restarts=0), workers=4, jobs=120,
                 batch=1, lease_seconds=0.5, work=WorkTime.parse("10-30"), reap_every_s=0.2)
    v = result.verdict
    assert result.exactly_once, (v.violations[:2], result.unfinished_jobs)
    assert v.redeliveries >= 2 and v.stale_completions >= 1  # late acknowledgements came, and were fenced off
    assert v.unclaimed_jobs == 0 and result.unfinished_jobs == 0


@pytest.mark.parametrize("batch", [1, 10])
def test_the_fast_paths_completion_carries_the_claims_value(run, tmp_path, batch):
    path = tmp_path / "locked_until.sql"
    path.write_text(LOCKED_UNTIL)
    result = run(str(path), workers=4, jobs=400, batch=batch)
    assert result.exactly_once and result.unfinished_jobs == 0  # every completion matched its row's value


def test_a_placeholder_naming_no_column_of_the_claim_is_refused_before_any_worker(run, tmp_path):
    path = tmp_path / "no_such_column.sql"
    path.write_text(LOCKED_UNTIL.replace("locked_until = %(locked_until)s", "locked_until = %(next)s"))
    with pytest.raises(SqlFileError, match=r"no_such_column.sql:9: section 'complete' uses %\(next\)s, which is "
                                           r"neither a parameter of 'complete' nor a column the claim returns"):
        run(str(path), workers=2, jobs=10)
