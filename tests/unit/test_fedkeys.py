"""The jobs a rate run judges (pg_claimcheck.engine.fedkeys): the seeded keys and exactly the keys the producers
committed, whatever gaps a producer that fell behind left. Pure: hand-built logs, no server."""
from array import array

from pg_claimcheck.engine.fedkeys import judged
from pg_claimcheck.errors import ClaimcheckError
from pg_claimcheck.server.schema import SeededJobs
from pg_claimcheck.verdict.ledger import CLAIM_IS_COMPLETION, WorkerLog, judge


def _log(worker: int, jobs: list[int]) -> WorkerLog:
    n = len(jobs)
    return WorkerLog(worker=worker, job=array("q", jobs), attempt=array("i", [1] * n),
                     claimed_at=array("d", [float(i) for i in range(n)]), ended_at=array("d", [i + 0.5 for i in range(n)]),
                     outcome=array("b", [CLAIM_IS_COMPLETION] * n))


def _verdict(seeded, logs):
    return judge(logs, seeded.first_id, seeded.last_id, drained=True, releases=False, keys=seeded.keys)


def test_keys_committed_right_after_the_seeded_ones_only_grow_the_range():
    seeded = SeededJobs(first_id=1, last_id=3, count=3, seconds=0.0)
    logs = [_log(0, [1, 2, 3, 4, 5])]
    after, same = judged(seeded, [4, 5], logs)
    assert (after.first_id, after.last_id, after.count, after.keys) == (1, 5, 5, None) and same is logs


def test_a_reserved_key_never_committed_is_no_job_and_a_claim_of_it_is_unexpected():
    seeded = SeededJobs(first_id=1, last_id=3, count=3, seconds=0.0)
    # Keys 4..7 reserved; the producer of 5 and 7 committed only 5... of its share: 7 never was.
    after, logs = judged(seeded, [4, 5, 6], [_log(0, [1, 2, 4]), _log(1, [3, 5, 6])])
    assert after.count == 6 and _verdict(after, logs).unclaimed_jobs == 0
    after, logs = judged(seeded, [4, 6], [_log(0, [1, 2, 4]), _log(1, [3, 6])])
    v = _verdict(after, logs)
    assert after.count == 5 and v.unclaimed_jobs == 0 and v.unexpected_jobs == 0 and v.exactly_once
    after, logs = judged(seeded, [4, 6], [_log(0, [1, 2, 4, 5]), _log(1, [3, 6, 6])])
    v = _verdict(after, logs)
    assert v.unexpected_jobs == 1 and v.double_claimed_jobs == 1 and [x.job for x in v.violations] == [6]


def test_a_key_produced_twice_is_refused():
    seeded = SeededJobs(first_id=1, last_id=3, count=3, seconds=0.0)
    try:
        judged(seeded, [3, 5], [])
    except ClaimcheckError as exc:
        assert "already seeded or produced twice" in str(exc)
    else:
        raise AssertionError("a produced key that was seeded must be refused")


def test_learnt_text_keys_join_the_seeded_ones_and_a_worker_s_unknown_numbers_become_jobs():
    from pg_claimcheck.contract.keys import KeySpace, unknown_number

    space = KeySpace.of(["a", "c"], key_is_int=False)
    seeded = SeededJobs(first_id=1, last_id=2, count=2, seconds=0.0, keys=space)
    # What a worker recorded: the seeded keys by number, the produced ones ("b", "d") and one nobody made ("z")
    # as unknown numbers with their text.
    log = _log(0, [1, unknown_number("b"), 2, unknown_number("d"), unknown_number("z")])
    log.unknown_keys = {unknown_number(k): k for k in ("b", "d", "z")}
    after, (moved,) = judged(seeded, ["b", "d"], [log])
    assert after.count == 4 and after.keys.keys == ["a", "b", "c", "d"]
    assert list(moved.job[:4]) == [1, 2, 3, 4] and moved.unknown_keys == {unknown_number("z"): "z"}
    v = _verdict(after, [moved])
    assert v.unexpected_jobs == 1 and v.unclaimed_jobs == 0 and v.unique_jobs_claimed == 5
