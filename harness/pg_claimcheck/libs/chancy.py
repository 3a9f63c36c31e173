"""chancy under the ledger (`pip install 'pg-claimcheck[chancy]'`): a PostgreSQL-only job queue on psycopg 3.

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

The pgbench cycle (`--pgbench`) is one worker's batch: `Worker.fetch_jobs`'s transaction (up to the
queue's concurrency), the tasks' work (one `\\sleep`, as they run concurrently), and one transaction of
the per-job updates `_maintain_updates` sends with executemany. chancy writes its SQL inline in
`Worker`, so the statements are copies in `sql/chancy.sql`, made from `SQL_COPIED_FROM`. Left out: what
runs on timers (heartbeat, leadership, recovery, pruner, metrics) and the pool's checks.
"""
# No `from __future__ import annotations`: chancy finds the job's `context: QueuedJob` by its annotation's class.
import asyncio
import contextlib
import logging
import uuid
from pathlib import Path

from chancy import Chancy, Queue, QueuedJob, Worker, job
from chancy.plugins.leadership import Leadership
from chancy.plugins.recovery import Recovery
from psycopg import sql

from pg_claimcheck.contract.dialect import rows_as_cte, substitute
from pg_claimcheck.contract.sqlfile import load_queries
from pg_claimcheck.libs._adapter import (
    LibraryAdapter,
    LibraryCycle,
    Recorder,
    WorkerConfig,
)

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
SQL_COPIED_FROM = "0.26.0"
"""The chancy version whose chancy/worker.py the statements of sql/chancy.sql were copied from."""
CHANCY_SQL: dict[str, str] = load_queries(Path(__file__).parent.parent / "sql" / "chancy.sql")

_recorder: Recorder | None = None
"""The worker process's recorder, for the job function (chancy imports jobs by their module path)."""


@job(queue=QUEUE_NAME, max_attempts=MAX_ATTEMPTS)
async def claimcheck_record(*, n: int, context: QueuedJob) -> None:
    started = context.started_at.timestamp() if context.started_at else None
    assert _recorder is not None, "the job runs only in a worker, which has its recorder"
    await _recorder.execute(n, str(context.id), context.attempts, started)


def _chancy(dsn: str, faults: bool = False) -> Chancy:
    plugins = [Leadership(poll_interval=FAULT_HEARTBEAT_S, timeout=FAULT_HEARTBEAT_TIMEOUT_S),
               Recovery(poll_interval=FAULT_HEARTBEAT_S)] if faults else []
    return Chancy(dsn, plugins=plugins, log=logging.getLogger("claimcheck.chancy"))  # its pool: 1 to 10


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
        timing = {"heartbeat_poll_interval": FAULT_HEARTBEAT_S,
                  "heartbeat_timeout": FAULT_HEARTBEAT_TIMEOUT_S} if config.faults else {}
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

    def pgbench_cycle(self, work_us: int) -> LibraryCycle:
        """One fetch of a batch (as many jobs as the queue's concurrency), its tasks, one flush of their updates
        (see the module docstring); each client a worker id of its own."""
        self.require_copied_from(SQL_COPIED_FROM, "Worker")
        jobs = sql.Identifier("chancy_jobs").as_string()
        fetch = substitute(CHANCY_SQL["fetch"].replace("{jobs}", jobs), {
            "queue": sql.Literal(QUEUE_NAME).as_string(), "maximum_jobs_to_fetch": str(CONCURRENCY),
            "worker_id": "'claimcheck-pgbench-' || :client_id"}.__getitem__)
        lines = ["BEGIN;", rows_as_cte(fetch, "cc_rows", "SELECT count(*) AS cc_n, coalesce(array_agg(id), '{}') "
                                                         "AS cc_ids FROM cc_rows"), "\\gset", "COMMIT;"]
        if work_us:
            lines += ["\\if :cc_n > 0", f"\\sleep {work_us} us", "\\endif"]
        # What on_job_completed sends back: succeeded, now, one more attempt; the row's own values otherwise.
        update = substitute(CHANCY_SQL["update"].replace("{jobs}", jobs), lambda name: {
            "state": "'succeeded'", "started_at": "started_at", "completed_at": "now()",
            "scheduled_at": "scheduled_at", "attempts": "attempts + 1", "errors": "errors", "meta": "meta",
            "max_attempts": "max_attempts", "claim_id": "claim_id"}.get(name, f"%({name})s"))
        lines += ["\\if :cc_n > 0", "BEGIN;"]
        for k in range(1, CONCURRENCY + 1):
            lines += [f"\\if :cc_n >= {k}",
                      update.replace("%(id)s", f"(CAST(:cc_ids AS uuid[]))[{k}]") + ";", "\\endif"]
        lines += ["COMMIT;", "\\endif"]
        return LibraryCycle(script="\n".join(lines) + "\n", jobs=CONCURRENCY,
                            statements=f"chancy {self.version()} Worker.fetch_jobs and _maintain_updates (one UPDATE "
                                       f"per job, one transaction), copied from chancy {SQL_COPIED_FROM} "
                                       f"(sql/chancy.sql); batch = the queue's concurrency {CONCURRENCY}")


ADAPTER = ChancyAdapter()
