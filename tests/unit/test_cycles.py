"""The claim cycles' rules (pg_claimcheck.engine.cycle), on the in-memory queue of tests/memory_queue.py:
no server. Each test runs a worker's Loop to its end and reads the backend's trace (every statement,
transaction and message sent, in order) and the worker's log, which is what the ledger judges."""
from __future__ import annotations

import pytest
from psycopg import errors

from memory_queue import LOST, LOST_AFTER_COMMIT, memory_loop
from pg_claimcheck.engine import cycle
from pg_claimcheck.errors import SqlFileError
from pg_claimcheck.settings import FaultPlan, WorkTime
from pg_claimcheck.verdict.ledger import CLAIM_IS_COMPLETION, DONE, FAILED

MODES = pytest.mark.parametrize("mode", ["lease", "lock"])


def serialization_failure() -> errors.SerializationFailure:
    return errors.SerializationFailure("could not serialize access due to concurrent update")


def kinds(trace: list, *names: str) -> list:
    return [event for event in trace if event[0] in names]


def assert_each_job_done_once(log, jobs: int) -> None:
    assert sorted(log.job) == list(range(1, jobs + 1)), list(log.job)
    assert set(log.outcome) == {DONE}


@MODES
def test_a_drained_queue_ends_the_loop_with_every_job_recorded_once_and_done(mode):
    loop, backend, log, trace = memory_loop(25, batch=10, mode=mode)
    loop.run()
    assert_each_job_done_once(log, 25)
    assert loop.telemetry.drained and loop.telemetry.empty_claims == 1 and loop.telemetry.claim_statements == 4
    assert len(loop.telemetry.claim_latency_ms) == 3 and loop.shared.progress[0] == 25
    assert all(row.status == "done" for row in backend.queue.jobs.values())


@MODES
def test_under_faults_a_claim_reaches_the_coordinator_once_it_committed_and_before_its_first_job_ends(mode):
    # Under faults the worker may be killed at any moment: the claim is sent at once, and never
    # before its transaction committed (a rolled-back claim is no claim).
    loop, _, log, trace = memory_loop(3, batch=3, mode=mode, faults=FaultPlan())
    loop.run()
    events = [e for e in trace if e[0] in ("claim", "commit", "send", "complete")]
    first_send = next(i for i, e in enumerate(events) if e[0] == "send" and e[1])
    assert events[first_send][1] == [1, 2, 3]  # the claim's records, in row order
    if mode == "lease":  # the claim commits on its own; its records go out before any work
        assert events[:first_send] == [("claim", [1, 2, 3])]
    else:  # recorded after the commit, with the jobs' endings
        assert events[:first_send] == [("claim", [1, 2, 3]), *[("complete", j, True) for j in (1, 2, 3)], ("commit",)]
    assert_each_job_done_once(log, 3)


def test_without_faults_the_records_wait_for_the_flush_interval():
    loop, _, log, trace = memory_loop(30, batch=10, mode="lease")
    loop.run()
    sends = [e for e in trace if e[0] == "send"]
    assert sends == [], sends  # nothing due within the run (the loop's end flushes: send_end, not here)
    loop.stream.flush()
    assert [e for e in trace if e[0] == "send"][0][1] == list(range(1, 31))


@MODES
def test_a_completion_that_fails_with_a_server_error_is_counted_and_retried(mode):
    loop, backend, log, trace = memory_loop(4, batch=2, mode=mode)
    backend.fail_next["complete"] = [None, serialization_failure()]  # the second completion of the first claim
    loop.run()
    assert_each_job_done_once(log, 4)
    assert loop.telemetry.sqlstates == {"40001": 1} and loop.telemetry.serialization_failures == 1
    if mode == "lease":  # retried alone: its claim stands
        assert loop.telemetry.claim_statements == 3 and ("rollback",) not in trace
    else:  # lock mode: the whole cycle rolled back and claimed again
        assert ("rollback",) in trace and loop.telemetry.claim_statements == 4


def test_in_lock_mode_a_failure_rolls_the_whole_cycle_back_and_records_nothing_of_it():
    loop, backend, log, trace = memory_loop(3, batch=3, mode="lock")
    backend.fail_next["complete"] = [None, None, serialization_failure()]
    loop.run()
    claims = kinds(trace, "claim")
    assert claims[0] == claims[1] == ("claim", [1, 2, 3])  # the same jobs again: the first claim was undone
    assert list(log.attempt) == [1, 1, 1]  # the rolled-back claim's attempt is not counted either
    assert_each_job_done_once(log, 3)


@MODES
def test_a_failed_commit_rolls_back_and_leaves_no_note_of_the_claim(mode):
    # The claim returns more rows than its batch: an over-claim, noted once its transaction committed.
    loop, backend, log, trace = memory_loop(6, batch=2, mode=mode, statements={
        **memory_loop()[0].plan.strategy.statements, "pick": "SELECT 1"})  # lease mode in a transaction too
    backend.batch = 3
    backend.fail_next["commit"] = [serialization_failure()]
    loop.run()
    assert ("rollback",) in trace
    assert [(rows, jobs) for _, rows, jobs in log.over_claims] == [(3, [1, 2, 3]), (3, [4, 5, 6])]
    assert_each_job_done_once(log, 6)


@MODES
def test_in_a_run_that_stops_at_its_proof_an_over_claim_records_only_the_rows_it_asked_for(mode):
    # Its count proves it: a claim of 1,000,000 rows was read, recorded, streamed and judged row by row
    # after that proof, 2 min 51 s and 4.55 GB (issue 35).
    loop, backend, log, trace = memory_loop(8, batch=2, mode=mode, stop_early=True)
    backend.batch = 5
    loop.run()
    assert [(rows, jobs) for _, rows, jobs in log.over_claims][0] == (5, [1, 2])
    assert list(log.job[:2]) == [1, 2] and not {3, 4, 5} & set(log.job)
    assert [backend.queue.jobs[j].status for j in (1, 2, 3)] == ["done", "done", "running"]


def test_a_lost_connection_during_a_claim_is_reconnected_and_the_claims_go_on():
    loop, backend, log, trace = memory_loop(10, batch=5)
    backend.fail_next["claim"] = [None, LOST]
    loop.run()
    assert loop.telemetry.reconnects == 1 and backend.connections == 2 and loop.telemetry.sqlstates == {}
    assert_each_job_done_once(log, 10)


def test_a_completion_lost_after_it_committed_is_read_back_from_the_job_not_run_again():
    loop, backend, log, trace = memory_loop(3, batch=3)
    backend.fail_next["complete"] = [None, LOST_AFTER_COMMIT]
    loop.run()
    assert loop.telemetry.reconnects == 1 and ("job_state", 2) in trace
    assert [e for e in kinds(trace, "complete") if e[1] == 2] == [("complete", 2, True)]  # once
    assert_each_job_done_once(log, 3)


def test_a_completion_lost_before_it_reached_the_server_is_run_again_on_the_new_connection():
    loop, backend, log, trace = memory_loop(3, batch=3)
    backend.fail_next["complete"] = [LOST]
    loop.run()
    assert loop.telemetry.reconnects == 1 and ("job_state", 1) in trace
    assert [e for e in kinds(trace, "complete") if e[1] == 1] == [("complete", 1, True)]
    assert_each_job_done_once(log, 3)


def test_a_requeue_is_timed_before_it_was_first_sent_and_a_claim_after_its_commit():
    # random.Random(0).random() is 0.84: at a fail rate of 0.99 every try of the one job fails, until
    # the queue fails it for good at its third attempt.
    loop, backend, log, trace = memory_loop(1, batch=1, fail_rate=0.99)
    loop.run()
    assert list(log.job) == [1, 1, 1] and list(log.attempt) == [1, 2, 3] and set(log.outcome) == {FAILED}
    for slot in range(3):
        sent = backend.sent_at[("fail", 1, slot + 1)]
        assert log.ended_at[slot] <= sent, "a requeue is timed no later than it was first sent"
        if slot:  # the re-claim is timed after the requeue that allowed it
            assert log.claimed_at[slot] > log.ended_at[slot - 1]


def test_in_lock_mode_a_requeue_is_timed_when_its_commit_was_sent():
    loop, backend, log, trace = memory_loop(1, batch=1, mode="lock", fail_rate=0.99)
    loop.run()
    assert set(log.outcome) == {FAILED}
    for slot in range(len(log)):
        assert log.ended_at[slot] < log.claimed_at[slot]  # before the commit returned, when the claim is timed


AFTER_COMMIT = {"after_commit": "SELECT pg_advisory_unlock(%(id)s)"}


@MODES
def test_after_commit_runs_for_each_job_once_the_transaction_that_ended_it_committed(mode):
    statements = {**memory_loop()[0].plan.strategy.statements, **AFTER_COMMIT}
    loop, backend, log, trace = memory_loop(2, batch=2, mode=mode, statements=statements)
    loop.run()
    events = [e[:2] for e in trace if e[0] in ("claim", "complete", "commit", "after_commit")][:6]
    if mode == "lease":  # each completion is its own transaction
        assert events == [("claim", [1, 2]), ("complete", 1), ("after_commit", 1), ("complete", 2),
                          ("after_commit", 2), ("claim", [])]
    else:
        assert events == [("claim", [1, 2]), ("complete", 1), ("complete", 2), ("commit",),
                          ("after_commit", 1), ("after_commit", 2)]
    assert_each_job_done_once(log, 2)


def test_a_claim_without_a_complete_section_is_its_jobs_completion():
    statements = {"claim": memory_loop()[0].plan.strategy.statements["claim"]}
    loop, backend, log, trace = memory_loop(4, batch=2, statements=statements)
    loop.run()
    assert set(log.outcome) == {CLAIM_IS_COMPLETION} and list(log.ended_at) == list(log.claimed_at)
    assert kinds(trace, "complete") == []


def test_the_claim_limit_and_the_stop_end_the_loop():
    loop, _, log, _ = memory_loop(50, batch=5, claims_per_worker=3)
    loop.run()
    assert loop.telemetry.claim_statements == 3 and len(log) == 15 and not loop.telemetry.drained
    loop, _, log, _ = memory_loop(50, batch=5)
    loop.shared.stop.value = 1
    loop.run()
    assert loop.telemetry.claim_statements == 0


def test_a_claim_that_keeps_failing_gives_up_at_the_consecutive_failure_limit(monkeypatch):
    monkeypatch.setattr(cycle, "MAX_CONSECUTIVE_ERRORS", 5)
    monkeypatch.setattr(cycle, "RETRY_BACKOFF_CAP_S", 0.0)
    loop, backend, log, _ = memory_loop(10, batch=5)
    backend.fail_next["claim"] = [serialization_failure() for _ in range(4)] + [None] \
        + [serialization_failure() for _ in range(4)]  # a success between resets the count
    loop.run()
    assert_each_job_done_once(log, 10) and loop.telemetry.sqlstates == {"40001": 8}
    loop, backend, log, _ = memory_loop(10, batch=5)
    backend.fail_next["claim"] = [serialization_failure() for _ in range(6)]
    with pytest.raises(SqlFileError, match=r"section 'claim' fails on the server in the claim's transaction, 5 times "
                                           r"in a row: .*\[40001\]"):
        loop.run()


def test_an_error_without_a_sqlstate_is_not_retried():
    loop, backend, log, _ = memory_loop(10, batch=5)
    backend.fail_next["claim"] = [errors.ProgrammingError("a client-side error")]
    with pytest.raises(errors.ProgrammingError):
        loop.run()


def test_work_time_is_spent_per_job_outside_the_claim_in_lease_mode():
    loop, backend, log, trace = memory_loop(2, batch=2, work=WorkTime("fixed", 20.0))
    loop.run()
    assert_each_job_done_once(log, 2)
    assert log.ended_at[1] - log.ended_at[0] >= 0.02 - 1e-3  # each job worked on in turn
