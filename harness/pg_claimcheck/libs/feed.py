"""`lib NAME --rate R --duration S`: a library fed through its own enqueue API while its own workers run.

One producer process enqueues on the schedule of pg_claimcheck.engine.producer (job i due at
`start + i / R`, open loop: a late enqueue is sent late, never skipped or moved; what is not sent by
`S + LAG_LIMIT_S` is reported as not enqueued), each job one call of the library's public enqueue
(procrastinate's `defer_async`, pgqueuer's `Queries.enqueue`, saq's `Queue.enqueue`: the adapter's
:meth:`pg_claimcheck.libs._adapter.LibraryAdapter.feeder`) on a connection kept open for the run. The
key travels in the payload, as for the jobs enqueued before the workers start: the seeded ones are
`1..jobs`, the produced ones `jobs + 1 ..` in schedule order, and since the producer commits in that
order, what it committed is a prefix of them (pg_claimcheck.engine.fedkeys judges exactly it). The
library's own job ids are not needed: the recording task reports each execution by its key.

The coordinator starts the producer once the library's workers run (their first job, of the ones
enqueued before them, has started: its table says so), and the schedule starts when the
producer's enqueuer is open, so the library's start-up is not in the first jobs' latency.
Latency is measured from each produced job's scheduled time to its execution's start (the claim the
ledger counts) and end, on this host's monotonic clock (the recording task's too), recorded per
worker log by the coordinator after the run (the library's workers are not ours to record in).
"""
from __future__ import annotations

import asyncio
import multiprocessing
import time

from pg_claimcheck.engine.producer import ProducerLog, ProducerPlan
from pg_claimcheck.errors import ClaimcheckError
from pg_claimcheck.libs import library_error
from pg_claimcheck.libs._adapter import LibraryAdapter
from pg_claimcheck.server import children, interrupts

JOIN_TIMEOUT_S = 10.0
"""At the end of the feed: how long the producer may take to send its log (its last enqueue's commit)."""
CLOSE_GRACE_S = 1.0
"""At close (the run's end, or Ctrl-C/SIGTERM while it feeds): how long the producer, told to stop, may
take to leave before it is killed. Its enqueues are the library's transactions, each committed or rolled
back by the server; an interrupted run's database is dropped anyway, so nothing waits for more."""


async def _feed(adapter: LibraryAdapter, dsn: str, plan: ProducerPlan, stop, enqueued, log: ProducerLog) -> None:
    async with adapter.feeder(dsn) as defer:
        clock = time.monotonic
        start = log.started_at = clock()
        for i in range(plan.scheduled):
            while wait := plan.pause(start, i, clock(), stop):
                await asyncio.sleep(wait)
            if wait is None:
                break
            await defer(plan.first_key + i)
            log.committed_at.append(clock())
            enqueued.value += 1


def feed_main(adapter: LibraryAdapter, dsn: str, plan: ProducerPlan, stop, producing, enqueued, sender) -> None:
    """The producer process: the library's enqueuer, on schedule, until the duration ends or the run stops."""
    children.child_process_setup()
    log = ProducerLog()
    try:
        asyncio.run(_feed(adapter, dsn, plan, stop, enqueued, log))
    except Exception as exc:  # reported by the coordinator: the run is not judged without its producer
        log.error = f"the {adapter.name} producer failed: {library_error(exc)}"
    finally:
        producing.value = 0  # only after its last commit: the coordinator then waits for the drain
        sender.send(log)
        sender.close()


class LibraryFeed:
    """The coordinator's side: the producer process, whether it may still enqueue, how many it committed."""

    def __init__(self, adapter: LibraryAdapter, dsn: str, plan: ProducerPlan) -> None:
        ctx = multiprocessing.get_context("fork")
        self.plan, self.log = plan, ProducerLog()
        self.stop, self.producing, self.enqueued = ctx.Value("b", 0), ctx.Value("b", 1), ctx.Value("q", 0)
        self.receiver, sender = ctx.Pipe(duplex=False)
        self.process = ctx.Process(target=feed_main, name="claimcheck-lib-producer", daemon=True,
                                   args=(adapter, dsn, plan, self.stop, self.producing, self.enqueued, sender))
        with interrupts.deferred():  # tracked before a Ctrl-C can be raised, as the workers
            self.process.start()
            sender.close()

    @property
    def feeding(self) -> bool:
        """May it still enqueue? (A producer that died without its last word may not.)"""
        return bool(self.producing.value) and self.process.is_alive()

    def finish(self) -> ProducerLog:
        """Stop it if it still runs, and its log; raises if it failed (the run is not judged without it)."""
        self.stop.value = 1
        try:
            if self.receiver.poll(JOIN_TIMEOUT_S):
                self.log = self.receiver.recv()
            else:
                self.log.error = "the producer did not report its enqueues"
        except (EOFError, OSError):
            self.log.error = f"the producer died without a word (exit code {self.process.exitcode})"
        finally:
            self.close()
        if self.log.error:
            raise ClaimcheckError(f"{self.log.error}; the run is not judged without its producer")
        return self.log

    def close(self) -> None:
        """Tell the producer to stop and reap it: within CLOSE_GRACE_S, killed after (it ignores Ctrl-C,
        which is the coordinator's to handle)."""
        self.stop.value = 1
        children.stop([self.process], ask=None, within_s=CLOSE_GRACE_S)
        self.receiver.close()
