"""The limits every coordinator keeps, and the judge every coordinator's record goes to, without a server.

The Supervisor is told what a run did at each tick and says which limit it reached; judge_run turns
a RunRecord and a table (a JobTable: here one in memory, as a library's or ours would answer) into
the RunResult whose `exactly_once` is the verdict.
"""
from __future__ import annotations

import math

from pg_claimcheck.contract.strategy import Strategy
from pg_claimcheck.engine.judge import RunRecord, judge_run
from pg_claimcheck.engine.supervisor import STALL_TIMEOUT_S, Supervisor, drained
from pg_claimcheck.server.schema import SeededJobs
from pg_claimcheck.settings import RunSettings
from pg_claimcheck.verdict.ledger import DONE, WorkerLog
from pg_claimcheck.verdict.observed import WorkerTelemetry
from pg_claimcheck.verdict.result import TableOutcome

LIMIT = RunSettings().stall_limit_s(STALL_TIMEOUT_S)


def test_claims_that_keep_coming_are_no_stall_but_nothing_finished_for_the_limit_is_no_progress():
    supervisor = Supervisor(RunSettings(), started=0.0)
    for tick in range(int(LIMIT) + 2):
        supervisor.saw(float(tick), activity=tick, progress=5)  # claims grow, finished jobs do not
    assert not supervisor.stalled(LIMIT + 1)
    assert supervisor.limit(LIMIT + 1) == "no-progress"


def test_no_claim_for_the_limit_is_a_stall_and_an_excuse_starts_the_wait_again():
    supervisor = Supervisor(RunSettings(), started=0.0)
    supervisor.saw(0.0, activity=10, progress=10)
    assert supervisor.limit(LIMIT - 0.1) is None
    supervisor.excuse(LIMIT - 0.1)  # a fault landed: a quiet spell that is no stall
    assert supervisor.limit(LIMIT + 1) is None
    assert supervisor.limit(2 * LIMIT) == "stalled"


def test_a_coordinator_that_cannot_count_progress_is_never_ended_for_it():
    supervisor = Supervisor(RunSettings(), started=0.0)
    for tick in range(int(LIMIT) * 2):
        supervisor.saw(float(tick), activity=tick)  # a library's table: activity only
    assert supervisor.limit(2 * LIMIT) is None


def test_the_time_limits_come_first_and_say_which():
    assert Supervisor(RunSettings(duration_s=5.0), started=0.0).limit(5.0) == "duration"
    assert Supervisor(RunSettings(time_cap_s=2.0), started=0.0).limit(2.0) == "time-cap"
    assert Supervisor(RunSettings(duration_s=5.0), started=0.0).limit(4.9) is None


def test_a_stalled_run_without_limits_drained_and_one_with_a_duration_did_not():
    assert drained("stalled", RunSettings()) and drained("drained", RunSettings(duration_s=5.0))
    assert not drained("stalled", RunSettings(duration_s=5.0)) and not drained("violation", RunSettings())


class _Table:
    """A JobTable in memory: what the table says after the run."""

    def __init__(self, done: int) -> None:
        self.done = done

    def outcome(self, seeded: SeededJobs, logs: list[WorkerLog]) -> TableOutcome:
        return TableOutcome(done=self.done, queued=seeded.count - self.done, running=0, failed=0, max_attempts=1)

    def final_status(self, jobs: set) -> dict:
        return {}

    def unrecorded(self, never: list[int]) -> tuple[int, int] | None:
        return None


def _log(worker: int, jobs: list[int]) -> WorkerLog:
    log = WorkerLog(worker=worker)
    for i, job in enumerate(jobs):
        slot = log.record(job, 1, 10.0 + 0.1 * i)
        log.end(slot, 10.05 + 0.1 * i, DONE)
    return log


def _record(logs: list[WorkerLog], **rest) -> RunRecord:
    """The record of these logs, each worker's telemetry started at 10.0 and finished at 12.0."""
    telemetry = [WorkerTelemetry(worker=log.worker, started_at=10.0, finished_at=12.0, claim_statements=len(log))
                 for log in logs]
    return RunRecord.of(logs, telemetry, "drained", drained=True, **rest)


STRATEGY = Strategy(name="in-memory", statements={"claim": "SELECT 1"}, source="test")


def test_one_record_one_judge_a_job_claimed_twice_is_a_double_claim_whoever_coordinated():
    logs = [_log(0, [1, 2]), _log(1, [2, 3])]
    record = _record(logs, workers_replaced=2)
    seeded = SeededJobs(first_id=1, last_id=3, count=3, seconds=0.0)
    result = judge_run(record, _Table(done=3), STRATEGY, RunSettings(workers=2, jobs=3, batch=1), seeded,
                       releases=False)
    assert not result.exactly_once and result.verdict.double_claimed_jobs == 1
    assert math.isclose(result.elapsed_s, 0.15) and result.claim_statements == 4
    assert result.as_dict()["reconnects"] == 2  # a library's replacements, as the JSON has always counted them


def test_one_record_one_judge_each_job_once_holds():
    record = _record([_log(0, [1, 2]), _log(1, [3])])
    seeded = SeededJobs(first_id=1, last_id=3, count=3, seconds=0.0)
    result = judge_run(record, _Table(done=3), STRATEGY, RunSettings(workers=2, jobs=3, batch=1), seeded,
                       releases=False)
    assert result.exactly_once and result.jobs_done == 3 and result.stopped_by == "drained"


def test_a_budgets_deadline_stops_a_run_but_never_before_it_ran_its_minimum():
    from pg_claimcheck.engine.supervisor import MIN_BUDGET_RUN_S

    early = Supervisor(RunSettings(), started=100.0, deadline=100.5)  # the share was spent before the release
    assert early.limit(100.0 + MIN_BUDGET_RUN_S - 0.1) is None
    assert early.limit(100.0 + MIN_BUDGET_RUN_S) == "budget"
    late = Supervisor(RunSettings(), started=100.0, deadline=110.0)
    assert late.limit(109.9) is None and late.limit(110.0) == "budget"
