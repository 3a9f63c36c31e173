"""saq under the ledger (`pip install 'pg-claimcheck[saq]'`), with its PostgreSQL queue.

Why saq: after procrastinate and pgqueuer it is the most downloaded maintained Python job queue
that can keep its queue in PostgreSQL (`saq.queue.postgres.PostgresQueue`, `saq[postgres]`); many
of its users start on Redis and move to Postgres to drop a service.

What it promises, from its docs (https://saq-py.readthedocs.io/, "Jobs": `timeout`, `heartbeat`,
`retries`; `PostgresQueue.sweep`): a job is dequeued by one worker (`FOR UPDATE SKIP LOCKED`); an
`active` job past its `timeout`, or whose `touched` time is older than its `heartbeat`, is stuck,
and a worker's periodic sweep aborts it and retries it while `attempts < retries`. So delivery is
at-least-once for jobs enqueued with retries: a job may run again after its worker stopped
touching it (crash, blocked event loop) for `heartbeat` seconds, never otherwise. In the installed
package: `Job.stuck` ("an active job passed its timeout or heartbeat"), `Job.retryable`
(`retries > attempts`) and `PostgresQueue.sweep` (abort, then retry or finish as aborted).

Everything goes through saq's public API: `PostgresQueue.connect` runs saq's own migrations,
`Queue.enqueue` enqueues, `Worker.start` is its own worker loop (with its sweep timer).

The pgbench cycle (`--pgbench`) is what one worker process sends for a batch. saq writes its SQL
inline in `PostgresQueue`'s methods, so the statements are copies in `sql/saq.sql`, made from
`SQL_COPIED_FROM` (building the script with another installed saq is refused, and a test fails).
`_dequeue` is one transaction: the dequeue of up to `limit` jobs (the number of the worker's
`concurrency` tasks waiting: all of them, here), then per job `_update` to `active` inside a
savepoint (psycopg's nested `conn.transaction()`), then COMMIT, then a NOTIFY (`_notify`) on its own.
Each of the worker's tasks then runs `Worker.process`: `job.update(status=ACTIVE)` and, once the
task returned, `job.finish(COMPLETE)`, which is `_update` with `expire_at` (jobs keep a `ttl`):
two transactions of one UPDATE each. The tasks run concurrently, so their work is one `\\sleep`.
Where saq sends a re-serialized job (`%(job)s`) and its unchanged `scheduled`, the script writes the
row's own values back (the same bytes, where saq writes a job of about the same size). Left out:
the pool's connection check before each statement (psycopg_pool's empty query, not saq's SQL) and
what runs on timers (worker info every 10 s, schedule and abort every second, the sweep).
"""
from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from pathlib import Path

import psycopg
from psycopg import sql
from saq import Job, Worker
from saq.queue.postgres import CHANNEL, DEQUEUE, JOBS_TABLE, PostgresQueue

from pg_claimcheck.contract.dialect import rows_as_cte, substitute
from pg_claimcheck.contract.sqlfile import load_queries
from pg_claimcheck.libs._adapter import LibraryAdapter, LibraryCycle, Recorder, WorkerConfig, pgbench_literal
from pg_claimcheck.libs._sql import LIB_QUERIES

TASK_NAME = "claimcheck_record"
RETRIES = 5
"""Attempts per job: saq's default is 1 (no retry), which would turn every crash into a lost job."""
FAULT_HEARTBEAT_S = 1
"""Under --faults: the job's heartbeat (whole seconds in saq); a job silent longer is swept."""
FAULT_SWEEP_S = 0.5
"""Under --faults: the workers' sweep timer (saq's default is 60 s)."""
JOB_TIMEOUT_S = 60
ENQUEUE_CONCURRENCY = 50
QUEUE_NAME = "default"
"""PostgresQueue's default queue name, which ours keep."""
SQL_COPIED_FROM = "0.26.4"
"""The saq version whose saq/queue/postgres.py the statements of sql/saq.sql were copied from."""
SAQ_SQL: dict[str, str] = load_queries(Path(__file__).parent.parent / "sql" / "saq.sql")
SUSPENDABLE_TIMERS = {"schedule": 900, "worker_info": 900, "sweep": 900}
"""`--idle-setting suspendable`: the Worker's timers (defaults 1, 10 and 60 s: saq/worker.py, Worker.__init__;
PostgresQueue.schedule dequeues, so its timer is the poll). New jobs still wake it by LISTEN/NOTIFY."""


def _queue(dsn: str) -> PostgresQueue:
    return PostgresQueue.from_url(dsn, min_size=1, max_size=4)


class SaqAdapter(LibraryAdapter):
    name = "saq"
    distribution = "saq"
    suspendable = ("Worker(timers={'schedule': 900, 'worker_info': 900, 'sweep': 900}) (defaults 1, 10 and 60 s: "
                   "saq/worker.py); its psycopg pool still replaces idle connections (max_idle 10 min)")
    promise = ("one worker per job (dequeue with FOR UPDATE SKIP LOCKED); an active job past its timeout or "
               "heartbeat is swept and retried while attempts < retries: at-least-once")
    docs = "https://saq-py.readthedocs.io/ (Job timeout/heartbeat/retries; PostgresQueue.sweep)"
    lease_s = float(FAULT_HEARTBEAT_S)
    # `touched` is written when the job starts and never again (the task sends no heartbeat), so a
    # job is stuck `heartbeat` seconds after it started; a stall begins right after the start.
    stall_release_s = FAULT_HEARTBEAT_S * 0.9

    def install(self, dsn: str) -> None:
        async def go() -> None:
            queue = _queue(dsn)
            await queue.connect()  # runs saq's migrations
            await queue.disconnect()

        asyncio.run(go())

    def enqueue(self, dsn: str, keys: range) -> list:
        heartbeat = FAULT_HEARTBEAT_S  # harmless when no fault comes: every job takes far less

        async def go() -> list:
            queue = PostgresQueue.from_url(dsn, min_size=1, max_size=ENQUEUE_CONCURRENCY // 5)
            await queue.connect()
            try:
                for start in range(0, len(keys), ENQUEUE_CONCURRENCY):
                    await asyncio.gather(*(
                        queue.enqueue(TASK_NAME, key=str(k), n=k, retries=RETRIES, timeout=JOB_TIMEOUT_S,
                                      heartbeat=heartbeat)
                        for k in keys[start:start + ENQUEUE_CONCURRENCY]))
            finally:
                await queue.disconnect()
            return [str(k) for k in keys]

        return asyncio.run(go())

    feeds = True

    @contextlib.asynccontextmanager
    async def feeder(self, dsn: str):
        queue = _queue(dsn)
        await queue.connect()
        try:
            async def defer(key: int) -> str:  # the same job as enqueue's, one at a time
                await queue.enqueue(TASK_NAME, key=str(key), n=key, retries=RETRIES, timeout=JOB_TIMEOUT_S,
                                    heartbeat=FAULT_HEARTBEAT_S)
                return str(key)

            yield defer
        finally:
            await queue.disconnect()

    async def work(self, config: WorkerConfig, recorder: Recorder, stop: asyncio.Event) -> None:
        logging.getLogger("saq").setLevel(logging.CRITICAL)

        async def claimcheck_record(ctx, *, n: int) -> None:
            job = ctx["job"]
            # saq sets `started` (epoch ms) when it dequeues the job into the worker's local queue
            await recorder.execute(n, job.key, job.attempts, job.started / 1000 if job.started else None)

        queue = _queue(config.dsn)
        await queue.connect()
        timers = {"sweep": FAULT_SWEEP_S} if config.faults else SUSPENDABLE_TIMERS if config.idle == "suspendable" else {}
        poll = {} if config.idle else {"dequeue_timeout": 1.0}
        worker = Worker(queue, functions=[(TASK_NAME, claimcheck_record)], timers=timers, **poll)
        running = asyncio.create_task(worker.start())
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({running, stopping}, return_when=asyncio.FIRST_COMPLETED)
        await worker.stop()  # saq's graceful stop
        await asyncio.gather(running, return_exceptions=True)
        stopping.cancel()
        await queue.disconnect()
        if not running.cancelled() and running.exception():
            raise running.exception()

    def pgbench_cycle(self, work_us: int) -> LibraryCycle:
        """One `_dequeue` transaction, the NOTIFY, each task's two updates (see the module docstring)."""
        self.require_copied_from(SQL_COPIED_FROM, "PostgresQueue")
        batch = inspect.signature(Worker.__init__).parameters["concurrency"].default
        ttl = Job.__dataclass_fields__["ttl"].default
        jobs = sql.Identifier(JOBS_TABLE)
        dequeue = sql.SQL(SAQ_SQL["dequeue"]).format(jobs_table=jobs).as_string()
        dequeue = substitute(dequeue, {
            "queue": sql.Literal(QUEUE_NAME).as_string(), "limit": str(batch), "plow": "0", "phigh": "32767",
            "now": "CAST(extract(epoch FROM now()) AS double precision)"}.__getitem__)  # saq: time.time()
        lines = ["BEGIN;",
                 rows_as_cte(dequeue, "cc_rows", "SELECT count(*) AS cc_n, coalesce(array_agg(convert_from(job, "
                                                 "'UTF8')::jsonb ->> 'key'), '{}') AS cc_keys FROM cc_rows"),
                 "\\gset"]

        def update(k: int, status: str, expire: bool) -> str:
            text = sql.SQL(SAQ_SQL["update"]).format(
                jobs_table=jobs, expire_at=sql.SQL(SAQ_SQL["update_expire_at"] if expire else "")).as_string()
            return substitute(text, {"job": "job", "scheduled": "scheduled", "status": f"'{status}'",
                                     "key": f"(CAST(:cc_keys AS text[]))[{k}]",
                                     "expire_at": f"CAST(extract(epoch FROM now()) AS bigint) + {ttl}"}.__getitem__) + ";"

        jobs_in_batch = range(1, batch + 1)
        for k in jobs_in_batch:  # each dequeued job marked active in a savepoint, as psycopg nests transactions
            lines += [f"\\if :cc_n >= {k}", f"SAVEPOINT cc_{k};", update(k, "active", False),
                      f"RELEASE SAVEPOINT cc_{k};", "\\endif"]
        lines.append("COMMIT;")
        channel, key = sql.Identifier(CHANNEL.format(QUEUE_NAME)), sql.Literal(DEQUEUE)
        notify = sql.SQL(SAQ_SQL["notify"]).format(channel=sql.SQL(pgbench_literal(channel.as_string())),
                                                   key=sql.SQL(pgbench_literal(key.as_string()))).as_string()
        lines += ["\\if :cc_n > 0", notify + ";", "\\endif"]
        for k in jobs_in_batch:
            lines += [f"\\if :cc_n >= {k}", "BEGIN;", update(k, "active", False), "COMMIT;", "\\endif"]
        if work_us:
            lines += ["\\if :cc_n > 0", f"\\sleep {work_us} us", "\\endif"]
        for k in jobs_in_batch:
            lines += [f"\\if :cc_n >= {k}", "BEGIN;", update(k, "complete", True), "COMMIT;", "\\endif"]
        return LibraryCycle(script="\n".join(lines) + "\n", jobs=batch,
                            statements=f"saq {self.version()} PostgresQueue._dequeue, _update, _notify, copied from "
                                       f"saq {SQL_COPIED_FROM} (sql/saq.sql); limit = Worker concurrency {batch}")

    def final_status(self, conn: psycopg.Connection, ids: dict[int, object]) -> dict[int, tuple[str, int]]:
        rows = conn.execute(LIB_QUERIES["saq_status"], {"keys": [str(k) for k in ids]}).fetchall()
        return {key: (status, attempts) for key, status, attempts in rows}


ADAPTER = SaqAdapter()
