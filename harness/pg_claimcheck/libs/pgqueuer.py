"""pgqueuer under the ledger (`pip install 'pg-claimcheck[pgqueuer]'`).

What it promises, from its docs (https://pgqueuer.readthedocs.io/, the "Heartbeat" guide and
`QueueManager.run`'s docstring): a worker dequeues with `FOR UPDATE SKIP LOCKED`, marks the job
`picked` and heartbeats it every `heartbeat_timeout / 2` while it runs; a `picked` job whose
heartbeat is older than `heartbeat_timeout` is picked again by any worker. So delivery is
at-least-once: a job may run again once its worker stopped heartbeating for `heartbeat_timeout`
(crash, lost connection, blocked event loop), never while its heartbeat is fresh. In the installed
package: `QueueManager.run`'s docstring ("heartbeat_timeout is the staleness threshold for
re-picking a job; heartbeats are emitted at half this interval").

Everything goes through pgqueuer's public API: `Queries.install` (what `pgq install` runs),
`Queries.enqueue`, and `QueueManager.run`, its own worker loop, on a psycopg connection
(`Queries.from_psycopg_connection`, so no asyncpg is needed). A worker whose connection dies
exits; the coordinator starts another in its place, as pgqueuer's supervisor (`pgq run`) would.

The pgbench cycle (`--pgbench`) is one turn of `QueueManager.run` as our workers run it: one
dequeue of `batch_size` jobs (`QueryQueueBuilder.build_dequeue_query`, with `run`'s own defaults for
batch size and heartbeat timeout read from its signature, our entrypoint without a concurrency
limit, no global limit, one queue manager id per client), the batch's tasks (which pgqueuer runs
concurrently: one `\\sleep` of the work time), and one `build_log_job_query` marking the batch
`successful`: completions go through a `JobStatusLogBuffer` whose `max_size` is the batch size, so a
batch is one flush. Every statement is autocommit, as pgqueuer requires of its connection. The
dequeue's `$n` arguments become SQL literals of the same values (psycopg's quoting); its final
query is read from a CTE so its count and ids can be kept with `\\gset` (its INSERT into the log
stays a top-level CTE, where PostgreSQL requires it). Left out: what runs on timers (heartbeats
every `heartbeat_timeout / 2` while a task runs, the health check and log aggregation every 10 and
30 s) and the poll between batches when the queue is empty.
"""
from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import uuid
from datetime import timedelta

import psycopg
from pgqueuer import Queries, QueueManager
from pgqueuer.adapters.persistence.qb import QueryQueueBuilder
from pgqueuer.types import QueueExecutionMode
from psycopg import sql

from pg_claimcheck.contract.dialect import substitute_numbered
from pg_claimcheck.errors import UsageError
from pg_claimcheck.libs._adapter import LibraryAdapter, LibraryCycle, Recorder, WorkerConfig, fetch_then_complete
from pg_claimcheck.libs._sql import LIB_QUERIES

ENTRYPOINT = "claimcheck_record"
ENQUEUE_CHUNK = 1_000
FAULT_LEASE_S = 2.0
"""Under --faults: heartbeat_timeout (pgqueuer's default is 30 s)."""
DEQUEUE_TIMEOUT = timedelta(seconds=1)
"""How long a worker waits for a NOTIFY before polling again."""
SUSPENDABLE = {"dequeue_timeout": timedelta(minutes=15), "log_aggregation_interval": timedelta(0)}
"""`--idle-setting suspendable`: the longest waits QueueManager.run takes (defaults 30 s each; 0 turns the log
aggregation off). Its listener health check (a NOTIFY every 10 s) is not a setting of run()."""


async def _connect(dsn: str) -> psycopg.AsyncConnection:
    return await psycopg.AsyncConnection.connect(dsn, autocommit=True)


class PgqueuerAdapter(LibraryAdapter):
    name = "pgqueuer"
    distribution = "pgqueuer"
    suspendable = ("none known: dequeue_timeout=15 min and log_aggregation_interval=0 (defaults 30 s each: "
                   "pgqueuer/core/qm.py, QueueManager.run) leave its listener health check, a NOTIFY every 10 s "
                   "that is no argument of run()")
    promise = ("one worker per job while its heartbeat is fresh (dequeue with FOR UPDATE SKIP LOCKED); a picked "
               "job whose heartbeat is older than heartbeat_timeout is picked again: at-least-once")
    docs = "https://pgqueuer.readthedocs.io/en/latest/ (Heartbeat guide; QueueManager.run)"
    lease_s = FAULT_LEASE_S
    # Beats go out every T/2 and are buffered up to T/8 more, so a job's last recorded beat can be
    # 0.625 T old when a stall begins: the job may be taken for abandoned 0.375 T after it.
    stall_release_s = 0.3 * FAULT_LEASE_S
    claim_lease_s = FAULT_LEASE_S
    """Until a job's first beat is written, its lease runs from its claim: the dequeue sets `heartbeat = NOW()`
    (qb.py), the first beat is sent heartbeat_timeout / 2 after the job's task is dispatched (core/heartbeat.py
    waits the interval first) and written up to T/8 later by the HeartbeatBuffer, on the connection the NOTIFY
    watcher may hold for a second; the dequeue re-picks a job whose `heartbeat < NOW() - heartbeat_timeout`.
    On a loaded machine a job's task starts a second or more after its claim (1.0 s at load 40, its heartbeat
    still the claim's when it stalled, a table sampled every 30 ms showed): a stall then begins with the job's
    heartbeat already that old, and pgqueuer re-picks it at claim + T, which can come before the stall's start
    plus stall_release_s. That re-pick is pgqueuer's promise (a stale heartbeat), a redelivery."""
    completion_lag_s = 2.0
    """Completions go through a JobStatusLogBuffer (flushed every 0.1 s by default) on the one
    connection the worker shares with its dequeues and heartbeats, and with the psycopg driver's
    NOTIFY watcher, which holds that connection for up to 1 s per wait (docs/libraries.md, findings;
    tests/findings/pgqueuer_psycopg_notify_lock.py): a flush can wait that second on top of its
    interval and a loaded event loop. 1.0 s was exceeded twice in `make test` on a loaded machine
    (a job finished at 0.46 s, its worker stalled more than 1 s later and was killed at 5.6 s with
    the completion unwritten, and the job ran again); a failed flush keeps them too."""

    def install(self, dsn: str) -> None:
        async def go() -> None:
            async with await _connect(dsn) as conn:
                await Queries.from_psycopg_connection(conn).install()

        asyncio.run(go())

    def enqueue(self, dsn: str, keys: range) -> list:
        async def go() -> list:
            ids: list = []
            async with await _connect(dsn) as conn:
                queries = Queries.from_psycopg_connection(conn)
                for start in range(0, len(keys), ENQUEUE_CHUNK):
                    chunk = keys[start:start + ENQUEUE_CHUNK]
                    ids += await queries.enqueue([ENTRYPOINT] * len(chunk), [str(k).encode() for k in chunk],
                                                 [0] * len(chunk))
            return ids

        return asyncio.run(go())

    feeds = True

    @contextlib.asynccontextmanager
    async def feeder(self, dsn: str):
        async with await _connect(dsn) as conn:
            queries = Queries.from_psycopg_connection(conn)

            async def defer(key: int) -> object:
                return (await queries.enqueue([ENTRYPOINT], [str(key).encode()], [0]))[0]

            yield defer

    async def work(self, config: WorkerConfig, recorder: Recorder, stop: asyncio.Event) -> None:
        logging.getLogger("pgqueuer").setLevel(logging.CRITICAL)
        async with await _connect(config.dsn) as conn:
            qm = QueueManager(Queries.from_psycopg_connection(conn))

            @qm.entrypoint(ENTRYPOINT)
            async def record(job) -> None:  # the dequeue sets `heartbeat` to the server's now(): the claim
                await recorder.execute(int(job.payload), job.id, job.attempts, job.heartbeat.timestamp())

            timeout = {"heartbeat_timeout": timedelta(seconds=FAULT_LEASE_S)} if config.faults else {}
            poll = {"": {"dequeue_timeout": DEQUEUE_TIMEOUT}, "defaults": {}, "suspendable": SUSPENDABLE}[config.idle]
            worker = asyncio.create_task(qm.run(mode=QueueExecutionMode.continuous, **poll, **timeout))
            stopping = asyncio.create_task(stop.wait())
            await asyncio.wait({worker, stopping}, return_when=asyncio.FIRST_COMPLETED)
            qm.shutdown.set()  # pgqueuer's graceful stop: in-flight jobs finish first
            # ... and its driver's, which pgqueuer sets only once the loop has wound down: until then every statement
            # of the stop (the last dequeue, the flushes) waits up to 1 s for the NOTIFY watcher's hold on the
            # connection (docs/libraries.md, findings): 2.6-5 s per stop, against 0.6 s. The watcher only feeds new
            # jobs' and cancellations' notices, which a stopping worker of ours has no use for.
            qm.queries.driver.shutdown.set()
            await asyncio.gather(worker, return_exceptions=True)
            stopping.cancel()
            if not worker.cancelled() and worker.exception():
                raise worker.exception()

    def pgbench_cycle(self, work_us: int) -> LibraryCycle:
        """One dequeue of a batch, its tasks, one completion flush (see the module docstring)."""
        defaults = inspect.signature(QueueManager.run).parameters
        batch = defaults["batch_size"].default
        builder = QueryQueueBuilder()  # what Queries.from_psycopg_connection builds, with pgqueuer's settings
        try:
            dequeue = builder.build_dequeue_query(
                batch_size=batch, entrypoints=[ENTRYPOINT], concurrency_limits=[0],
                queue_manager_id=uuid.UUID(int=0), global_concurrency_limit=None,
                heartbeat_timeout=defaults["heartbeat_timeout"].default)
            log_jobs = builder.build_log_job_query()
        except (TypeError, AttributeError) as exc:
            raise UsageError(f"claimcheck lib pgqueuer --pgbench builds the worker's statements with pgqueuer's "
                             f"QueryQueueBuilder, which pgqueuer {self.version()} builds differently ({exc}); "
                             "run it without --pgbench") from None
        # Each worker is a QueueManager with an id of its own: one per client.
        manager = "CAST(lpad(to_hex(:client_id + 1), 32, '0') AS uuid)"
        args = [manager if isinstance(a, uuid.UUID) else sql.Literal(a).as_string() for a in dequeue.args]
        return fetch_then_complete(
            substitute_numbered(dequeue.sql, lambda n: args[n - 1]),
            "SELECT count(*) AS cc_n, coalesce(array_agg(id), '{}') AS cc_ids, "
            "coalesce(array_agg('successful'::text), '{}') AS cc_statuses, "
            "coalesce(array_agg(NULL::text), '{}') AS cc_tracebacks FROM cc_rows",
            substitute_numbered(log_jobs.strip().rstrip(";"),
                                lambda n: ("(:cc_ids)", "(:cc_statuses)", "(:cc_tracebacks)")[n - 1]),
            work_us, batch, f"pgqueuer {self.version()} QueryQueueBuilder: build_dequeue_query "
                            f"(batch_size {batch}), build_log_job_query (the batch, one flush)")

    def final_status(self, conn: psycopg.Connection, ids: dict[int, object]) -> dict[int, tuple[str, int]]:
        key_of = {job_id: key for key, job_id in ids.items()}
        rows = conn.execute(LIB_QUERIES["pgqueuer_status"], {"ids": list(key_of)}).fetchall()
        return {key_of[job_id]: (status, attempts) for job_id, status, attempts in rows}


ADAPTER = PgqueuerAdapter()
