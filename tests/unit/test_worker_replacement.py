"""A replacement for a killed worker joins a run under way, maybe while a restart fault has the
server down: it waits for the server (as a reconnecting worker does) instead of failing the run,
and leaves quietly if the run ends first. No server is needed: nothing listens on port 1."""
import multiprocessing
import time

from pg_claimcheck.contract.strategy import load_strategy
from pg_claimcheck.engine.shared import Shared
from pg_claimcheck.engine.worker import WorkerPlan, worker_main
from pg_claimcheck.server.runcontext import RunContext
from pg_claimcheck.settings import RunSettings

DOWN = "postgresql://postgres@127.0.0.1:1/postgres?connect_timeout=1"


def test_a_replacement_waits_for_a_server_that_is_down_and_leaves_quietly_when_the_run_ends():
    plan = WorkerPlan(run=RunContext(DOWN, "replacement0"), strategy=load_strategy("skip-locked"),
                      settings=RunSettings(workers=1, jobs=10))
    ctx = multiprocessing.get_context("fork")
    shared = Shared.forked(ctx, 1, producers=0)
    receiver, sender = ctx.Pipe(duplex=False)
    process = ctx.Process(target=worker_main, args=(plan, 0, None, shared, sender), daemon=True)  # no barrier
    process.start()
    sender.close()
    try:
        time.sleep(1.0)
        assert process.is_alive() and not receiver.poll()  # still trying, nothing to say yet
        shared.stop.value = 1
        assert receiver.poll(10)
        kind, summary = receiver.recv()
        assert kind == "end" and summary["error"] is None, summary
    finally:
        process.join(10)
        if process.is_alive():
            process.kill()
    assert process.exitcode == 0
