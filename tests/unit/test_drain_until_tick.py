"""The coordinator's drain of worker messages ends at its tick, however many messages wait.

On a busy machine (load 40-66) 16 workers always had a message ready, the drain never returned, and
the monitor's tick never came: no fault was injected until the run had drained, no budget or stall
limit was applied. A worker here floods its pipe; the drain must still return by its deadline."""
from __future__ import annotations

import multiprocessing
import selectors
import threading
import time

from pg_claimcheck.engine.driver import _Run
from pg_claimcheck.engine.logstream import LogDelta
from pg_claimcheck.verdict.ledger import WorkerLog


class _Watch:
    def __init__(self) -> None:
        self.seen = 0

    def see(self, log, first_new, ended) -> None:
        self.seen += 1


def test_the_drain_returns_by_its_deadline_while_a_worker_floods_its_pipe():
    receiving, sending = multiprocessing.Pipe(duplex=False)
    stop = threading.Event()
    sent = [0]

    def flood() -> None:
        while not stop.is_set():  # empty deltas: each adds no record, so `start` stays 0
            sending.send(("log", LogDelta(start=0).to_wire()))
            sent[0] += 1

    run = object.__new__(_Run)
    run.selector = selectors.DefaultSelector()
    run.selector.register(receiving, selectors.EVENT_READ, 0)
    run.receivers, run.logs_by_worker, run.watch = {0: receiving}, {0: WorkerLog(worker=0)}, _Watch()
    flooder = threading.Thread(target=flood, daemon=True)
    flooder.start()
    drain = threading.Thread()
    try:
        while sent[0] < 100:  # the pipe is full of waiting messages before the drain starts
            time.sleep(0.01)
        drain = threading.Thread(target=run._drain_messages, args=(time.monotonic() + 0.2,), daemon=True)
        drain.start()
        drain.join(timeout=60)  # returning at all is the test: before, it returned when no message waited
        assert not drain.is_alive(), "the drain did not return by its deadline while messages kept coming"
        assert run.watch.seen > 0
    finally:
        stop.set()
        if drain.is_alive():
            run.selector.unregister(receiving)
        while flooder.is_alive():
            if receiving.poll(0.05):
                receiving.recv()
        run.selector.close()
        receiving.close()
        sending.close()
