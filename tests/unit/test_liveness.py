"""Safety and liveness told apart (pg_claimcheck.verdict.liveness): the words, the causes, the exit codes."""
from __future__ import annotations

from types import SimpleNamespace

from pg_claimcheck.verdict.liveness import (
    EXIT_CODES,
    HELD,
    NO_PROGRESS,
    VIOLATED,
    WORDS,
    Waiting,
    endings_words,
    failure,
    settings_to_read,
    worst_outcome,
)


def cause(stopped_by="drained", reason=None, done=10, seeded=10, left=0, waiting=Waiting(), endings=None, limits=None):
    return failure(stopped_by, reason, done, seeded, left, 12.5, waiting, endings or {}, limits or {})


def test_a_drained_run_and_a_run_stopped_in_time_with_jobs_done_made_progress():
    assert cause() is None
    assert cause("duration", done=3, seeded=10_000) is None
    assert cause("stalled", left=0) is None  # stalled with nothing left: nothing was kept waiting


def test_no_progress_keeps_the_supervisors_reason():
    assert cause("no-progress", "no job was finished for 30s: worker w01 ...") == \
        "no job was finished for 30s: worker w01 ..."


def test_jobs_waiting_for_a_retry_not_yet_due_are_named_as_the_cause_of_a_stall():
    said = cause("stalled", "no claim was committed for 30s", left=25, waiting=Waiting(retries=25, next_retry_s=41.2))
    assert said.startswith("no claim was committed for 30s, with 25 job(s) left")
    assert "25 of them waiting for a retry not yet due (the next in 41s)" in said and "--backoff-unit" in said


def test_a_run_whose_time_ran_out_before_any_job_finished_made_no_progress():
    assert cause("duration", done=0, seeded=500) == "no job was finished in the run's 12.5s"


def test_the_servers_own_timeout_is_named_with_its_value():
    said = cause("duration", done=0, seeded=500, endings={"25P03": 52},
                 limits={"idle_in_transaction_session_timeout": "1s"})
    assert "the server ended the workers' sessions 52 time(s): 25P03 idle_in_transaction_session_timeout = 1s ×52" \
        in said
    assert settings_to_read({"25P03": 1, "57P01": 2, "40001": 3}) == ["idle_in_transaction_session_timeout"]
    assert "terminated by an administrator" in endings_words({"57P01": 2}, {})
    assert endings_words({"40001": 3}, {}) is None  # a serialization failure ends no session


def test_a_violation_wins_over_no_progress_and_each_has_its_exit_code():
    runs = [SimpleNamespace(outcome=o) for o in (HELD, NO_PROGRESS)]
    assert worst_outcome(runs) == NO_PROGRESS
    assert worst_outcome(runs + [SimpleNamespace(outcome=VIOLATED)]) == VIOLATED
    assert worst_outcome(runs[:1]) == HELD
    assert EXIT_CODES == {HELD: 0, VIOLATED: 1, NO_PROGRESS: 3}
    assert WORDS[NO_PROGRESS] == "NO PROGRESS" and WORDS[VIOLATED] == "VIOLATED"
