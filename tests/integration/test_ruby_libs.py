"""delayed_job, the first Ruby library, through its own Ruby worker (pg_claimcheck/libs/ruby/delayed_job.rb)
on Debian's packages, judged by the ledger (claimcheck lib delayed_job): a healthy run, fed while it
works, and a killed and a stalled worker whose jobs come back once `max_run_time` ran out."""
import dataclasses

import pytest

from pg_claimcheck.errors import UsageError
from pg_claimcheck.libs import load_adapter
from pg_claimcheck.libs.runner import lib_settings, run_library
from pg_claimcheck.settings import FaultPlan


@pytest.fixture(scope="session")
def delayed_job():
    try:
        return load_adapter("delayed_job")
    except UsageError as exc:
        pytest.skip(f"delayed_job cannot run here: {str(exc)[:200]}")


def test_a_healthy_delayed_job_run_executes_every_job_exactly_once(server, delayed_job):
    result = run_library(server, delayed_job, lib_settings(workers=2, jobs=40))
    v = result.verdict
    assert result.exactly_once, (v.violations[:3], result.table, result.library)
    assert v.claims == 40 == v.unique_jobs_claimed and v.redeliveries == 0
    assert result.table.done == 40 and result.unfinished_jobs == 0
    assert result.library["version"] == delayed_job.pinned  # its hello: the gem Ruby loaded


def test_delayed_job_fed_through_its_own_enqueue_while_it_works(server, delayed_job):
    result = run_library(server, delayed_job, lib_settings(workers=2, jobs=10, duration_s=1.0, rate_per_s=10))
    p, v = result.producer, result.verdict
    assert result.exactly_once and result.stopped_by == "drained", (v.violations[:3], result.table)
    assert p.enqueued == p.scheduled == 10 and v.claims == v.unique_jobs_claimed == 20


def test_a_killed_and_a_stalled_delayed_job_worker_s_job_runs_again_after_max_run_time(server, delayed_job):
    settings = dataclasses.replace(lib_settings(workers=2, jobs=40, faults=True),
                                   faults=FaultPlan(kills=1, terminates=0, stalls=1, restarts=0))
    result = run_library(server, delayed_job, settings)
    v = result.verdict
    assert sorted(f.kind for f in result.faults) == ["kill", "stall"]
    assert v.unclaimed_jobs == 0 and result.unfinished_jobs == 0, result.library
    assert result.exactly_once, (v.violations[:3], [f.as_dict() for f in result.faults])
