"""The coordinator's watch over streamed records: progress, and violations proven mid-run."""
import math

from pg_claimcheck.engine.watch import RunWatch
from pg_claimcheck.verdict.ledger import CLAIM_IS_COMPLETION, DONE, FAILED, LIVE, STALE, WorkerLog


def records(worker, *claims):
    out = WorkerLog(worker=worker)
    for job, attempt, at, outcome in claims:
        out.record(job, attempt, at, math.nan if outcome == LIVE else at, outcome)
    return out


def test_a_second_claim_proves_a_double_claim_where_nothing_releases():
    watch = RunWatch(1, 10, proves=True)
    watch.see(records(0, (1, 1, 0.1, DONE), (2, 1, 0.1, DONE)), 0, [])
    assert watch.proof is None and watch.progress == 2
    watch.see(records(1, (2, 2, 0.3, DONE)), 0, [])
    assert "job 2 was claimed a second time" in watch.proof and watch.proof_at == 0.3
    assert watch.progress == 2  # the same job finished again is no progress


def test_nothing_is_proven_where_claims_can_be_released():
    watch = RunWatch(1, 10, proves=False)
    watch.see(records(0, (2, 1, 0.1, FAILED), (2, 2, 0.3, DONE), (3, 1, 0.4, STALE)), 0, [])
    assert watch.proof is None and watch.progress == 2  # a failure and a finished job


def test_an_unseeded_key_and_a_completion_that_changed_no_row_are_proofs():
    watch = RunWatch(1, 10, proves=True)
    watch.see(records(0, (99, 1, 0.1, CLAIM_IS_COMPLETION)), 0, [])
    assert "never seeded" in watch.proof
    watch = RunWatch(1, 10, proves=True)
    log = records(0, (1, 1, 0.1, LIVE))
    watch.see(log, 0, [])
    log.end(0, 0.2, STALE)  # the ending arrives in a later delta
    watch.see(log, 1, [0])
    assert "changed no row" in watch.proof and watch.proof_at == 0.2


def test_an_over_claims_note_proves_it_before_any_of_its_rows_arrive():
    watch, log = RunWatch(1, 10, proves=True), WorkerLog(worker=3)
    log.over_claims.append((0.25, 1_000_000, [1, 2]))  # the note the worker sends before recording the rows
    watch.see(log, 0, [])
    assert "w03's claim returned 1,000,000 rows" in watch.proof and watch.proof_at == 0.25
    elsewhere = RunWatch(1, 10, proves=False)
    elsewhere.see(log, 0, [])
    assert elsewhere.proof is None  # a run that does not stop on a proof judges it at its end
