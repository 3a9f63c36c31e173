"""The producer's process as the coordinator sees it (claimcheck.engine.producer.ProducerProcess): forked
inside interrupts.deferred() like the workers, it must still end on terminate(). No server is needed."""
import multiprocessing
import time
from types import SimpleNamespace

from claimcheck.engine.producer import ProducerProcess
from claimcheck.engine.worker import Shared
from claimcheck.server import interrupts


def _shared(ctx) -> Shared:
    return Shared(stop=ctx.Value("b", 0, lock=False), progress=ctx.Array("q", 1, lock=False),
                  producing=ctx.Value("b", 1, lock=False), feed_start=ctx.Value("d", float("nan"), lock=False))


def test_a_producer_forked_with_interrupts_blocked_still_ends_on_terminate():
    ctx = multiprocessing.get_context("fork")
    connecting = ctx.Event()
    plan = SimpleNamespace(run=SimpleNamespace(connect=lambda role: (connecting.set(), time.sleep(60))))  # it hangs
    with interrupts.deferred():  # as the driver forks it
        producer = ProducerProcess(ctx, plan, ctx.Barrier(2), _shared(ctx))
    try:
        assert connecting.wait(10)
        producer.process.terminate()
        producer.process.join(5)
        assert not producer.process.is_alive()  # SIGTERM was left blocked: it waited out the connect
    finally:
        if producer.process.is_alive():
            producer.process.kill()
            producer.process.join()
        producer.receiver.close()
