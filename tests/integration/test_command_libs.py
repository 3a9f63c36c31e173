"""The Python libraries whose workers are their own commands (django-tasks' `db_worker`, django-q2's `qcluster`,
`taskiq worker`), through them, judged by the ledger: one short healthy run and one fault run each (their long
runs are in `claimcheck bench --libs NAME --scoreboard`, docs/libraries.md). Each skips with the extra to
install when its library is not installed (the test extra installs them all)."""
import dataclasses

import pytest
from test_libs import adapter_or_skip, database_exists

from pg_claimcheck.engine import supervisor
from pg_claimcheck.libs.runner import lib_settings, run_library
from pg_claimcheck.server.schema import new_run_id
from pg_claimcheck.settings import FaultPlan

JOBS = 50
SHORT_STALL_LIMIT_S = 15.0
"""A run whose library keeps jobs it will never run ends at the supervisor's stall limit: shortened (the
commands must start within it: Django and taskiq take a few seconds on a loaded machine)."""
NEVER_CLAIMS_STALL_LIMIT_S = 5.0
"""taskiq-postgres's runs, which can never claim a task (the finding below): the limit counts from the workers'
hello (pg_claimcheck.libs.runner), so it only has to end the run, not to wait out a start-up or a slow job; each
run waited 10 s longer at SHORT_STALL_LIMIT_S and showed nothing more."""


def healthy(server, library: str):
    run_id = new_run_id()
    result = run_library(server, adapter_or_skip(library), lib_settings(workers=2, jobs=JOBS), run_id=run_id)
    assert not database_exists(server, run_id)  # the run's own database is gone
    return result


def faulted(server, library: str, plan: FaultPlan):
    settings = dataclasses.replace(lib_settings(workers=2, jobs=JOBS, faults=True), faults=plan)
    return run_library(server, adapter_or_skip(library), settings)


@pytest.mark.parametrize("library", ["django-tasks", "django-q2"])
def test_a_healthy_run_of_a_django_queue_runs_every_task_once(server, library):
    result = healthy(server, library)
    v = result.verdict
    assert result.exactly_once, (v.violations[:3], result.table, result.library)
    assert v.claims == JOBS == v.unique_jobs_claimed and v.redeliveries == 0 and result.table.done == JOBS


def test_django_tasks_losing_a_killed_workers_task_is_what_it_promised(server, monkeypatch):
    """db_worker claims a task (RUNNING) and nothing gives it back: a SIGKILLed worker's task is never run, which
    its at-most-once promise allows; it is reported (`lost_as_promised`), and no task ran twice."""
    monkeypatch.setattr(supervisor, "STALL_TIMEOUT_S", SHORT_STALL_LIMIT_S)
    result = faulted(server, "django-tasks", FaultPlan(kills=1, terminates=0, stalls=0, restarts=0))
    v = result.verdict
    assert [f.kind for f in result.faults] == ["kill"]
    assert v.double_claimed_jobs == 0 and v.reruns_against_promise == 0, v.violations[:3]
    assert result.table.done + v.lost_as_promised == JOBS and result.library["delivery"] == "at-most-once"
    assert result.exactly_once, (v.violations[:3], result.library)


def test_django_q2_presents_a_stalled_task_again_and_loses_none(server, record_property):
    """The ORM broker's lease runs from its claim (`retry`, 5 s under faults): a task stalled past it is presented
    again, and nothing is lost. How the ledger reads the second execution is reported, not asserted: the claim
    is the cluster's pusher's, which may be seconds before the execution starts (its internal queue), and the
    ledger knows only the start, so a presentation after `retry` can read as a double (docs/libraries.md: django-q2)."""
    result = faulted(server, "django-q2", FaultPlan(kills=0, terminates=0, stalls=1, restarts=0))
    v = result.verdict
    assert [f.kind for f in result.faults] == ["stall"]
    assert v.unclaimed_jobs == 0 and result.unfinished_jobs == 0 and result.table.done == JOBS, result.library
    assert v.claims > JOBS  # the stalled task, presented again after retry
    record_property("django-q2 under a stall", f"exactly_once={result.exactly_once} redeliveries={v.redeliveries} "
                                               f"double={v.double_claimed_jobs} kinds={sorted({x.kind for x in v.violations})}")


def test_taskiq_postgres_never_runs_a_task_kicked_before_a_worker_listens(server, monkeypatch):
    """taskiq-postgres hands a message to a worker only by its NOTIFY: the tasks enqueued before the workers
    started stay `pending` and never run (tests/findings/taskiq_postgres_kicked_before_a_worker_listens.py). The
    ledger calls them lost: a broken promise, with no fault."""
    monkeypatch.setattr(supervisor, "STALL_TIMEOUT_S", NEVER_CLAIMS_STALL_LIMIT_S)
    result = healthy(server, "taskiq-postgres")
    v = result.verdict
    assert not result.exactly_once and result.stopped_by == "stalled"
    assert v.claims == 0 and v.unclaimed_jobs == JOBS and result.table.queued == JOBS, result.library


def test_taskiq_postgres_fault_kinds_find_no_worker_to_fault(server, monkeypatch):
    """Its fault run: with no task ever started (the finding above), no worker is mid-task to kill, and the
    run says so rather than reporting a kill that hit nothing."""
    monkeypatch.setattr(supervisor, "STALL_TIMEOUT_S", NEVER_CLAIMS_STALL_LIMIT_S)
    result = faulted(server, "taskiq-postgres", FaultPlan(kills=1, terminates=0, stalls=0, restarts=0))
    assert result.faults == [] and result.faults_skipped
    assert result.verdict.unclaimed_jobs == JOBS
