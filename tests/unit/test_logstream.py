"""A worker's records reach the coordinator whole, through the deltas of `LogStream`, over a real pipe.

Whatever a worker records between flushes (claims, endings of claims already sent, leases,
over-claims, over-attempts, unknown keys), the coordinator's copy, built only from what crossed
the pipe, ends equal to the worker's log. And nothing is sent twice: each unknown key crosses once.
"""
from __future__ import annotations

import math
import multiprocessing

from hypothesis import given, settings
from hypothesis import strategies as st

from claimcheck.verdict.ledger import DONE, LIVE, STALE, WorkerLog
from claimcheck.engine.logstream import LogStream, merge_delta

# One step of a worker between flushes: a claim of some rows (a negative job is an unknown key,
# as claimcheck.contract.claimrows numbers them), the end of an earlier claim, a note, or a flush.
claim = st.tuples(st.just("claim"), st.lists(st.integers(-5, 40), min_size=1, max_size=4))
end = st.tuples(st.just("end"), st.integers(0, 10_000), st.sampled_from([DONE, STALE]))
note = st.tuples(st.just("note"), st.sampled_from(["leases", "over_claims", "over_attempts"]))
NOTES = {"leases": (0, 1.0, 31.0), "over_claims": (1.0, 11, [1, 2]), "over_attempts": (1, 4, 3)}
"""One entry of each kind of note, as the worker's log holds them."""
flush = st.tuples(st.just("flush"))


def fields(log: WorkerLog) -> tuple:
    """Everything the stream carries; NaN (a claim not ended yet) compared as itself."""
    ended = [None if math.isnan(t) else t for t in log.ended_at]
    return (list(log.job), list(log.attempt), list(log.claimed_at), ended, list(log.outcome), log.leases,
            log.over_claims, log.over_attempts, log.unknown_keys)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(claim, end, note, flush), max_size=40))
def test_the_coordinators_copy_is_the_workers_log(steps):
    receiver, sender = multiprocessing.Pipe(duplex=False)
    log, copy = WorkerLog(worker=0), WorkerLog(worker=0)
    stream = LogStream(sender, log, interval_s=0.5)
    unknown_sent: list[int] = []

    def deliver() -> None:
        while receiver.poll():
            kind, payload = receiver.recv()
            assert kind == "log"
            unknown_sent.extend(payload[-1][3])
            merge_delta(copy, payload)

    clock = 0.0
    for step in steps:
        clock += 1.0
        if step[0] == "claim":
            for job in step[1]:
                if job < 0:
                    log.unknown_keys[job] = f"key {job}"
            log.record_claims([(job, 1) for job in step[1]], clock)
        elif step[0] == "end" and len(log):
            slot = step[1] % len(log)
            if log.outcome[slot] == LIVE:
                log.end(slot, clock, step[2])
                stream.mark_ended(slot)
        elif step[0] == "note":
            getattr(log, step[1]).append(NOTES[step[1]])
        elif step[0] == "flush":
            stream.flush()
            deliver()
    stream.flush()
    deliver()
    receiver.close()
    sender.close()

    assert fields(copy) == fields(log)
    assert sorted(unknown_sent) == sorted(log.unknown_keys), "an unknown key crossed the pipe more than once"


def test_a_flush_with_nothing_new_sends_nothing():
    receiver, sender = multiprocessing.Pipe(duplex=False)
    log = WorkerLog(worker=0)
    stream = LogStream(sender, log, interval_s=0.5)
    log.unknown_keys[-1] = "stray"
    log.record_claims([(-1, 1)], 1.0)
    stream.flush()
    assert receiver.poll()
    receiver.recv()
    stream.flush()  # the unknown key is known to the coordinator now: no message at all
    assert not receiver.poll()
    receiver.close()
    sender.close()
