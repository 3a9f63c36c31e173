"""A worker's records reach the coordinator whole, as the `LogDelta`s of `LogStream`, over a real pipe
and through Locust's messages.

Whatever a worker records between flushes (claims, endings of claims already sent, leases,
over-claims, over-attempts, unknown keys), the coordinator's copy, built only from what crossed
the pipe, ends equal to the worker's log. And nothing is sent twice: each unknown key crosses once.
The same deltas, shifted onto another clock and packed by msgpack as Locust packs its messages,
make a copy equal to the log with every one of its times shifted by as much.
"""
from __future__ import annotations

import math
import multiprocessing

import msgpack
from hypothesis import given, settings
from hypothesis import strategies as st

from pg_claimcheck.engine.logstream import LogDelta, LogStream, PipeSink, receive
from pg_claimcheck.verdict.ledger import DONE, LIVE, STALE, WorkerLog

# One step of a worker between flushes: a claim of some rows (a negative job is an unknown key,
# as pg_claimcheck.contract.claimrows numbers them), the end of an earlier claim, a note, or a flush.
claim = st.tuples(st.just("claim"), st.lists(st.integers(-5, 40), min_size=1, max_size=4))
end = st.tuples(st.just("end"), st.integers(0, 10_000), st.sampled_from([DONE, STALE]))
note = st.tuples(st.just("note"), st.sampled_from(["leases", "over_claims", "over_attempts", "backends"]))
NOTES = {"leases": (0, 1.0, 31.0), "over_claims": (1.0, 11, [1, 2]), "over_attempts": (1, 4, 3), "backends": (0, 4242)}
"""One entry of each kind of note, as the worker's log holds them."""
flush = st.tuples(st.just("flush"))
steps_of_a_worker = st.lists(st.one_of(claim, end, note, flush), max_size=40)


def fields(log: WorkerLog, shift: float = 0.0) -> tuple:
    """Everything the stream carries, the times of the worker's clock moved by `shift`; NaN (a claim
    not ended yet) compared as itself."""
    ended = [None if math.isnan(t) else t + shift for t in log.ended_at]
    over_claims = [(t + shift, n, jobs) for t, n, jobs in log.over_claims]
    return (list(log.job), list(log.attempt), [t + shift for t in log.claimed_at], ended, list(log.outcome),
            log.leases, over_claims, log.over_attempts, log.unknown_keys, log.backends)


class Messages:
    """A RecordSink as Locust's messaging is one: each delta on another clock, packed by msgpack."""

    def __init__(self, offset_s: float) -> None:
        self.offset_s, self.packed = offset_s, []

    def send_delta(self, delta: LogDelta) -> None:
        self.packed.append(msgpack.packb(delta.shifted(self.offset_s).to_wire()))

    def send_end(self, summary: dict) -> None:
        raise AssertionError("not sent here")


def work(log: WorkerLog, stream: LogStream, steps, deliver) -> None:
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


@settings(max_examples=150, deadline=None)
@given(steps_of_a_worker)
def test_the_coordinators_copy_is_the_workers_log(steps):
    receiver, sender = multiprocessing.Pipe(duplex=False)
    log, copy = WorkerLog(worker=0), WorkerLog(worker=0)
    stream = LogStream(PipeSink(sender), log, interval_s=0.5)
    unknown_sent: list[int] = []

    def deliver() -> None:
        while receiver.poll():
            delta = receive(receiver)
            assert isinstance(delta, LogDelta)
            unknown_sent.extend(delta.unknown_keys)
            delta.merge_into(copy)

    work(log, stream, steps, deliver)
    receiver.close()
    sender.close()

    assert fields(copy) == fields(log)
    assert sorted(unknown_sent) == sorted(log.unknown_keys), "an unknown key crossed the pipe more than once"


@settings(max_examples=100, deadline=None)
@given(steps_of_a_worker, st.sampled_from([0.0, 1.25, -3.5, 1.7e9]))
def test_deltas_shifted_onto_the_servers_clock_and_packed_as_locust_packs_them_make_the_shifted_log(steps, offset):
    log, copy = WorkerLog(worker=0), WorkerLog(worker=0)
    messages = Messages(offset)
    stream = LogStream(messages, log, interval_s=0.5)

    def deliver() -> None:
        for packed in messages.packed:
            LogDelta.from_wire(msgpack.unpackb(packed)).merge_into(copy)
        messages.packed.clear()

    work(log, stream, steps, deliver)

    assert fields(copy) == fields(log, shift=offset)


def test_a_flush_with_nothing_new_sends_nothing():
    receiver, sender = multiprocessing.Pipe(duplex=False)
    log = WorkerLog(worker=0)
    stream = LogStream(PipeSink(sender), log, interval_s=0.5)
    log.unknown_keys[-1] = "stray"
    log.record_claims([(-1, 1)], 1.0)
    stream.flush()
    assert receiver.poll()
    receiver.recv()
    stream.flush()  # the unknown key is known to the coordinator now: no message at all
    assert not receiver.poll()
    receiver.close()
    sender.close()


def test_a_delta_out_of_order_is_a_harness_bug_said_as_such():
    delta = LogDelta(start=3, job=[7], attempt=[1], claimed_at=[1.0], ended_at=[math.nan], outcome=[LIVE])
    try:
        delta.merge_into(WorkerLog(worker=2))
    except RuntimeError as exc:
        assert "worker 2: log delta starts at 3, 0 records known" in str(exc)
    else:
        raise AssertionError("merged out of order")


def test_an_attempt_number_above_32_bits_is_recorded_and_streamed_whole():
    # An attempts value above 2^31 - 1 ended the run in an IndexError traceback (a 32-bit column, the
    # record left half-written), exit 1, which a bar reads as "unsafe".
    receiver, sender = multiprocessing.Pipe(duplex=False)
    log = WorkerLog(worker=0)
    stream = LogStream(PipeSink(sender), log, interval_s=0.5)
    log.record_claims([(7, 3_000_000_001), (8, 2**63 - 1)], 1.0)
    stream.flush()
    copy = WorkerLog(worker=0)
    receive(receiver).merge_into(copy)
    assert list(copy.attempt) == [3_000_000_001, 2**63 - 1] and list(copy.job) == [7, 8]
    receiver.close()
    sender.close()
