"""saq under the ledger (`pip install 'claimcheck[saq]'`), with its PostgreSQL queue.

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
"""
from __future__ import annotations

import asyncio
import logging

import psycopg
from saq import Worker
from saq.queue.postgres import PostgresQueue

from claimcheck.libs._adapter import LibraryAdapter, Recorder, WorkerConfig
from claimcheck.libs._sql import LIB_QUERIES

TASK_NAME = "claimcheck_record"
RETRIES = 5
"""Attempts per job: saq's default is 1 (no retry), which would turn every crash into a lost job."""
FAULT_HEARTBEAT_S = 1
"""Under --faults: the job's heartbeat (whole seconds in saq); a job silent longer is swept."""
FAULT_SWEEP_S = 0.5
"""Under --faults: the workers' sweep timer (saq's default is 60 s)."""
JOB_TIMEOUT_S = 60
ENQUEUE_CONCURRENCY = 50


def _queue(dsn: str) -> PostgresQueue:
    return PostgresQueue.from_url(dsn, min_size=1, max_size=4)


class SaqAdapter(LibraryAdapter):
    name = "saq"
    distribution = "saq"
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

    async def work(self, config: WorkerConfig, recorder: Recorder, stop: asyncio.Event) -> None:
        logging.getLogger("saq").setLevel(logging.CRITICAL)

        async def claimcheck_record(ctx, *, n: int) -> None:
            job = ctx["job"]
            # saq sets `started` (epoch ms) when it dequeues the job into the worker's local queue
            await recorder.execute(n, job.key, job.attempts, job.started / 1000 if job.started else None)

        queue = _queue(config.dsn)
        await queue.connect()
        timers = {"sweep": FAULT_SWEEP_S} if config.faults else {}
        worker = Worker(queue, functions=[(TASK_NAME, claimcheck_record)], timers=timers, dequeue_timeout=1.0)
        running = asyncio.create_task(worker.start())
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({running, stopping}, return_when=asyncio.FIRST_COMPLETED)
        await worker.stop()  # saq's graceful stop
        await asyncio.gather(running, return_exceptions=True)
        stopping.cancel()
        await queue.disconnect()
        if not running.cancelled() and running.exception():
            raise running.exception()

    def final_status(self, conn: psycopg.Connection, ids: dict[int, object]) -> dict[int, tuple[str, int]]:
        rows = conn.execute(LIB_QUERIES["saq_status"], {"keys": [str(k) for k in ids]}).fetchall()
        return {key: (status, attempts) for key, status, attempts in rows}


ADAPTER = SaqAdapter()
