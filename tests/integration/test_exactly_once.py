"""The verdicts of the catalog, measured on a real server with `claimcheck check`'s defaults
(16 workers, 20,000 jobs, batch 10, lease mode, stopping at a proven violation). Every assertion
is about what the ledger and the table say happened; a strategy's `expected` label is only
compared with it."""
import pytest

CHECK_DEFAULTS = dict(workers=16, jobs=20_000, batch=10, mode="lease", stop_early=True)
"""As `claimcheck check` runs (without --drain): a safe claim still drains all 20,000 jobs, an unsafe
one stops once a double claim is proven (naive-single ran 47 s to a full drain, its workers queued
on one row at a time)."""


def test_skip_locked_claims_every_job_exactly_once(run):
    result = run("skip-locked", **CHECK_DEFAULTS)
    v = result.verdict
    assert v.claims == v.unique_jobs_claimed == 20_000
    assert v.double_claimed_jobs == 0 and v.extra_claims == 0
    assert v.unclaimed_jobs == 0 and v.unexpected_jobs == 0
    assert result.table.done == 20_000 and result.table.max_attempts == 1
    assert result.exactly_once
    assert result.stopped_by == "drained"


@pytest.mark.parametrize("name", ["naive-subquery", "naive-single", "cte-no-lock"])
def test_unsafe_claims_are_caught(run, name):
    result = run(name, **CHECK_DEFAULTS)
    v = result.verdict
    assert v.double_claimed_jobs > 0, f"{name} was not caught: {v}"
    assert not result.exactly_once
    assert result.strategy.expected == "unsafe"
    # The evidence names the job, the workers and the attempts of each claim.
    first = v.violations[0]
    assert len(first.claims) >= 2 and len({c.worker for c in first.claims}) >= 2
    assert [c.attempt for c in first.claims] == sorted(c.attempt for c in first.claims)


@pytest.mark.parametrize("name", ["for-update", "serializable"])
def test_safe_claims_pass(run, name):
    result = run(name, **CHECK_DEFAULTS)
    assert result.exactly_once, result.verdict.violations[:3]
    assert result.table.done == 20_000


def test_serializable_counts_its_retries(run):
    result = run("serializable", workers=8, jobs=2_000, batch=10)
    assert result.exactly_once
    assert result.serialization_failures > 0


def test_select_then_update_runs_its_pick_in_the_claim_transaction(run):
    result = run("select-then-update", workers=8, jobs=3_000, batch=10)
    assert result.verdict.claims >= 3_000
    assert result.verdict.unclaimed_jobs == 0
