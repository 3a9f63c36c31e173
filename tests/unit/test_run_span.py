"""The run's span: from the first worker's release to the last thing that happened to a job."""
import math

from pg_claimcheck.engine.judge import run_span
from pg_claimcheck.verdict.ledger import DONE, WorkerLog
from pg_claimcheck.verdict.observed import WorkerTelemetry


def log(worker: int, started: float, finished: float, records=()) -> tuple[WorkerLog, WorkerTelemetry]:
    """A worker's log of (job, claimed, ended) records, and its telemetry's start and end."""
    out = WorkerLog(worker=worker)
    for job, claimed, ended in records:
        slot = out.record(job, 1, claimed)
        if not math.isnan(ended):
            out.end(slot, ended, DONE)
    return out, WorkerTelemetry(worker=worker, started_at=started, finished_at=finished)


def span(workers: list[tuple[WorkerLog, WorkerTelemetry]]) -> tuple[float, float]:
    return run_span([w for w, _ in workers], [t for _, t in workers])


def test_the_run_ends_with_its_last_job_not_with_the_workers_checking_the_queue_is_empty():
    logs = [log(0, 10.0, 13.1, [(1, 10.1, 11.0), (2, 11.0, 12.5)]),
            log(1, 10.02, 13.2, [(3, 10.2, 12.9)])]
    assert span(logs) == (10.0, 12.9)


def test_a_claim_never_ended_counts_by_its_claim():
    logs = [log(0, 10.0, 13.0, [(1, 10.1, 11.0), (2, 12.0, math.nan)]),  # killed while it held job 2
            log(1, 10.0, 13.0, [(3, 10.2, 11.5)])]
    assert span(logs) == (10.0, 12.0)


def test_a_run_where_nothing_was_claimed_ends_with_its_last_worker():
    assert span([log(0, 10.0, 10.4), log(1, 10.1, 10.5)]) == (10.0, 10.5)


def test_a_replacement_that_never_started_does_not_move_the_start():
    waiting = log(2, 0.0, 12.0)  # a replacement still waiting for the server when the run ended
    assert span([log(0, 10.0, 13.0, [(1, 10.1, 11.0)]), waiting]) == (10.0, 11.0)
