"""chancy under the ledger (`pip install 'claimcheck[chancy]'`): a PostgreSQL-only job queue on psycopg 3.

Why chancy: a queue written for PostgreSQL alone (no broker), with the plugins users want from one
(recovery, leadership, retries, cron, workflows), in asyncio.

What it promises, from its own docs (the Recovery plugin, https://tkte.ch/chancy/ and
`chancy/plugins/recovery.py`): jobs of a worker whose heartbeat is older than `heartbeat_timeout`
are "abandoned"; the leader's Recovery puts them back to `pending` with one more allowed attempt,
"invalidates the old execution's claim", and "late updates from the old claim are discarded even
if it keeps running". A job is fetched by one worker (`FOR UPDATE SKIP LOCKED`, `Worker.fetch_jobs`).
So delivery is at-least-once, with a redelivery only after the worker holding the job stopped
heartbeating for `heartbeat_timeout`.

Everything goes through chancy's public API: `Chancy.migrate` creates its tables, `Chancy.declare`
the queue, `Chancy.push_many` enqueues, and each worker process runs `Worker`, chancy's own loop,
with its default plugins (Leadership, Recovery, Pruner, Metrics, Workflow). The queue runs chancy's
`AsyncExecutor`: the recording task is a coroutine, and a stall blocks the worker's event loop, its
heartbeat with it, as blocking code in an async job does. (chancy's default executor is a process
pool, where a job blocking its process leaves the worker's heartbeat alive: not run here.)
chancy reports a job's completion through its worker's outgoing queue, flushed every second
(`Worker.send_outgoing_interval`): a worker killed within it may make the job run again.
"""
# No `from __future__ import annotations`: chancy finds the job's `context: QueuedJob` by its annotation's class.
import asyncio
import contextlib
import logging
import uuid

from chancy import Chancy, Queue, QueuedJob, Worker, job
from chancy.plugins.leadership import Leadership
from chancy.plugins.recovery import Recovery

from claimcheck.libs._adapter import LibraryAdapter, Recorder, WorkerConfig

QUEUE_NAME = "claimcheck"
CONCURRENCY = 10
"""Jobs one worker runs at once (chancy's default is the core count)."""
MAX_ATTEMPTS = 5
"""Attempts per job: chancy's default is 1 (no retry); Recovery adds one per recovery anyway."""
FAULT_HEARTBEAT_S = 1
FAULT_HEARTBEAT_TIMEOUT_S = 3
"""Under --faults: the worker's heartbeat (default 30 s) and how old it may get (90 s), in whole seconds;
Recovery and Leadership poll every second (60 s), the leader's lease lasting 3 s (120 s)."""
ENQUEUE_BATCH = 500

_recorder: Recorder | None = None
"""The worker process's recorder, for the job function (chancy imports jobs by their module path)."""


@job(queue=QUEUE_NAME, max_attempts=MAX_ATTEMPTS)
async def claimcheck_record(*, n: int, context: QueuedJob) -> None:
    started = context.started_at.timestamp() if context.started_at else None
    await _recorder.execute(n, str(context.id), context.attempts, started)


def _chancy(dsn: str, faults: bool = False) -> Chancy:
    plugins = [Leadership(poll_interval=FAULT_HEARTBEAT_S, timeout=FAULT_HEARTBEAT_TIMEOUT_S),
               Recovery(poll_interval=FAULT_HEARTBEAT_S)] if faults else []
    return Chancy(dsn, plugins=plugins, min_connection_pool_size=1, max_connection_pool_size=4,
                  log=logging.getLogger("claimcheck.chancy"))


class ChancyAdapter(LibraryAdapter):
    name = "chancy"
    distribution = "chancy"
    promise = ("one worker per job (FOR UPDATE SKIP LOCKED); jobs of a worker whose heartbeat is older than "
               "heartbeat_timeout are recovered to pending and retried, the old claim's late updates discarded: "
               "at-least-once")
    docs = "https://tkte.ch/chancy/ (plugins: Recovery); chancy/plugins/recovery.py"
    lease_s = float(FAULT_HEARTBEAT_TIMEOUT_S)
    # The heartbeat was last written up to one interval before the stall began.
    stall_release_s = (FAULT_HEARTBEAT_TIMEOUT_S - FAULT_HEARTBEAT_S) * 0.9
    completion_lag_s = 1.5  # the outgoing queue's 1 s flush, and its round trip

    def install(self, dsn: str) -> None:
        async def go() -> None:
            async with _chancy(dsn) as chancy:
                await chancy.migrate()
                await chancy.declare(Queue(QUEUE_NAME, concurrency=CONCURRENCY, executor=Chancy.Executor.Async,
                                           polling_interval=1, eager_polling=True))

        asyncio.run(go())

    def enqueue(self, dsn: str, keys: range) -> list:
        async def go() -> list:
            ids = []
            async with _chancy(dsn) as chancy:
                jobs = [claimcheck_record.job.with_kwargs(n=k) for k in keys]
                async for refs in chancy.push_many(jobs, batch_size=ENQUEUE_BATCH):  # a transaction per batch
                    ids += [ref.identifier for ref in refs]
            return ids

        return asyncio.run(go())

    feeds = True

    @contextlib.asynccontextmanager
    async def feeder(self, dsn: str):
        async with _chancy(dsn) as chancy:
            async def defer(key: int) -> str:
                return (await chancy.push(claimcheck_record.job.with_kwargs(n=key))).identifier

            yield defer

    async def work(self, config: WorkerConfig, recorder: Recorder, stop: asyncio.Event) -> None:
        global _recorder
        _recorder = recorder
        logging.getLogger("claimcheck.chancy").setLevel(logging.CRITICAL)
        timing = dict(heartbeat_poll_interval=FAULT_HEARTBEAT_S,
                      heartbeat_timeout=FAULT_HEARTBEAT_TIMEOUT_S) if config.faults else {}
        async with _chancy(config.dsn, config.faults) as chancy:
            worker = Worker(chancy, worker_id=f"claimcheck-w{config.worker:02d}-{uuid.uuid4().hex[:8]}",
                            register_signal_handlers=False, shutdown_timeout=5, **timing)
            await worker.start()
            stopping = asyncio.create_task(stop.wait())
            done = asyncio.create_task(worker.wait_for_shutdown())
            await asyncio.wait({stopping, done}, return_when=asyncio.FIRST_COMPLETED)
            await worker.stop()  # chancy's graceful stop: running jobs drain, updates flushed
            stopping.cancel()
            await asyncio.gather(done, return_exceptions=True)

    def final_status(self, conn, ids: dict[int, object]) -> dict[int, tuple[str, int]]:
        from claimcheck.libs._sql import LIB_QUERIES

        rows = conn.execute(LIB_QUERIES["chancy_status"], {"keys": list(ids)}).fetchall()
        return {key: (status, attempts) for key, status, attempts in rows}


ADAPTER = ChancyAdapter()
