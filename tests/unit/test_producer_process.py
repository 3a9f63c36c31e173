"""The producer's process as the coordinator sees it (pg_claimcheck.engine.producer.ProducerProcess): forked
inside interrupts.deferred() like the workers, it must still end on terminate(), and it sees the run stop while it waits
for a job's due time. No server is needed."""
import contextlib
import multiprocessing
import time
from types import SimpleNamespace

from pg_claimcheck.engine import producer
from pg_claimcheck.engine.producer import ProducerProcess
from pg_claimcheck.engine.shared import Shared
from pg_claimcheck.server import interrupts


def _shared(ctx) -> Shared:
    return Shared.forked(ctx, 1, producers=1)


def test_a_producer_forked_with_interrupts_blocked_still_ends_on_terminate():
    ctx = multiprocessing.get_context("fork")
    connecting = ctx.Event()
    plan = SimpleNamespace(run=SimpleNamespace(connect=lambda role: (connecting.set(), time.sleep(60))),  # it hangs
                           producers=1)
    with interrupts.deferred():  # as the driver forks it
        process = ProducerProcess(ctx, plan, ctx.Barrier(2), _shared(ctx))
    try:
        assert connecting.wait(10)
        process.process.terminate()
        process.process.join(5)
        assert not process.process.is_alive()  # SIGTERM was left blocked: it waited out the connect
    finally:
        if process.process.is_alive():
            process.process.kill()
            process.process.join()
        process.receiver.close()


def test_a_stopped_producer_does_not_sleep_until_its_next_due_time(monkeypatch):
    ctx = multiprocessing.get_context("fork")
    shared = _shared(ctx)
    enqueued = ctx.Value("q", 0, lock=False)
    monkeypatch.setattr(producer, "enqueue", lambda conn, strategy, key, *_: (setattr(enqueued, "value", key), (key,))[1])
    # 0.05 jobs/s: job 0 is due at the start, job 1 twenty seconds later.
    plan = SimpleNamespace(run=SimpleNamespace(connect=lambda role: contextlib.nullcontext()), strategy=None,
                           rate_per_s=0.05, duration_s=100.0, first_key=1, producers=1,
                           learns_keys=False, key_is_int=True, channel=None,
                           jobs_of=lambda index: range(index, 5))
    plan.pause = lambda *args: producer.ProducerPlan.pause(plan, *args)  # the schedule's own pacing
    with interrupts.deferred():
        process = ProducerProcess(ctx, plan, ctx.Barrier(1), shared)
    try:
        deadline = time.monotonic() + 10
        while enqueued.value != 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert enqueued.value == 1
        time.sleep(0.3)
        shared.stop.value = 1
        assert process.receive(3), process.log.error  # it sees the stop within a slice, not in 20 s
        assert process.log.error is None and process.log.enqueued == 1
    finally:
        process.process.join(5)
        if process.process.is_alive():
            process.process.kill()
            process.process.join()
        process.receiver.close()
