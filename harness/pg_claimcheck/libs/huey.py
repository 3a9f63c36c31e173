"""huey under the ledger (`pip install 'pg-claimcheck[huey]'`), with its PostgreSQL storage, `PostgresHuey`.

Why huey: one of the most downloaded Python task queues (Redis, SQLite, PostgreSQL, files); since
huey 3.5 its PostgreSQL storage is built in (`huey[postgres]`, psycopg 3), where it was a peewee
`SqlHuey` in `huey.contrib.sql_huey` before.

What it promises, from its docs (https://huey.readthedocs.io/en/latest/recipes.html, "Graceful
Shutdown and Re-enqueueing Interrupted Tasks"; the file is docs/recipes.rst of coleifer/huey): "When
the consumer is shut down with SIGTERM, any tasks that are mid-execution are interrupted. By
default, these tasks are lost." The code says the same of any failure: `PostgresStorage._dequeue`
takes a task with one autocommitted `DELETE ... WHERE id = (SELECT ... FOR UPDATE SKIP LOCKED)
RETURNING data`, so a task is in no table while it runs, nothing holds a lease on it, and nothing
gives it back. Delivery is at-most-once: a task must never run twice, and one taken by a consumer
that dies is gone.

Everything goes through huey's public API: `PostgresHuey(create_tables=True)` creates its tables,
`Huey.enqueue` enqueues (each task with an id of ours, `cc<key>.`, given to `TaskWrapper.s`), and
each worker process is one consumer (`Huey.create_consumer`, huey's `huey_consumer` with `-w 1
-k thread`), as its deployment docs run several consumers on one queue, the periodic scheduler off
(`-n`) as they ask for all but one. The task returns a value, so huey stores its result under the
task id (`huey_kv`): a task is done when its result is there. The coordinator reads those tables
(sql/libs.sql); huey keeps no row for a running task, so the jobs running are the ones neither
queued nor done.

The pgbench cycle (`--pgbench`) is what one consumer thread sends per task, autocommitted as huey's
connection is: the dequeue, `Huey.is_revoked`'s read of the revoke keys, the task's work, and the
result's upsert. huey writes its SQL inline in `PostgresStorage`, so the statements are copies in
`sql/huey.sql`, made from `SQL_COPIED_FROM`; the task id, which huey reads from the pickled task, is
the md5 of that pickle in the script (as unique, and SQL can compute it). Left out: the LISTEN
connection's wait, which an empty queue alone reaches.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from pathlib import Path

import psycopg
from huey import PostgresHuey
from psycopg import sql

from pg_claimcheck.contract.dialect import rows_as_cte, substitute
from pg_claimcheck.contract.sqlfile import load_queries
from pg_claimcheck.libs._adapter import (
    ForgetsJobs,
    LibraryCycle,
    NoLease,
    Recorder,
    WorkerConfig,
    pgbench_literal,
)
from pg_claimcheck.libs._sql import LIB_QUERIES
from pg_claimcheck.verdict.result import TableOutcome

QUEUE_NAME = "claimcheck"
"""huey's queue name (the `queue` column of its tables)."""
SQL_COPIED_FROM = "3.5.4"
"""The huey version whose huey/storage.py the statements of sql/huey.sql were copied from."""
HUEY_SQL: dict[str, str] = load_queries(Path(__file__).parent.parent / "sql" / "huey.sql")


def task_id(key: int) -> str:
    """Our key as huey's task id: the trailing dot keeps `cc17.` from being found inside `cc170.` in
    the pickled task (sql/libs.sql's huey_status looks for a queued task that way)."""
    return f"cc{key}."


def _huey(dsn: str, recorder: Recorder | None = None, *, create_tables: bool = True) -> tuple[PostgresHuey, object]:
    """huey on the run's database, and its task (registered the same way in the enqueuer and the consumer;
    without `create_tables`, huey connects only when first used)."""
    huey = PostgresHuey(QUEUE_NAME, dsn=dsn, create_tables=create_tables)

    @huey.task(context=True, name="claimcheck_record")
    def claimcheck_record(n: int, task=None) -> bool:
        # huey's workers are threads running synchronous tasks: one event loop per execution.
        assert recorder is not None, "the task runs only in a consumer, which has its recorder"
        asyncio.run(recorder.execute(n, task.id, None))
        return True  # stored as the task's result: the coordinator's "done"

    return huey, claimcheck_record


class HueyAdapter(ForgetsJobs, NoLease):
    name = "huey"
    distribution = "huey"
    promise = ("a task is deleted from the queue when a consumer takes it: one consumer per task, and "
               "tasks mid-execution when the consumer stops are lost (by default): at-most-once")
    docs = ("https://huey.readthedocs.io/en/latest/recipes.html (Graceful Shutdown and Re-enqueueing "
            "Interrupted Tasks); huey.storage.PostgresStorage._dequeue")
    delivery = "at-most-once"

    def install(self, dsn: str) -> None:
        huey, _ = _huey(dsn)  # create_tables=True: huey's own DDL
        huey.storage.close()

    def enqueue(self, dsn: str, keys: range) -> list:
        huey, record = _huey(dsn)
        try:
            for k in keys:
                huey.enqueue(self._task(record, k))
        finally:
            huey.storage.close()
        self.seeded_now(len(keys))
        return [task_id(k) for k in keys]

    @staticmethod
    def _task(record, key: int):
        return record.s(n=key, id=task_id(key))  # TaskWrapper.s takes the task's id

    feeds = True

    @contextlib.asynccontextmanager
    async def feeder(self, dsn: str):
        huey, record = _huey(dsn)
        try:
            async def defer(key: int) -> str:  # huey's enqueue is synchronous: one INSERT and its NOTIFY
                huey.enqueue(self._task(record, key))
                return task_id(key)

            yield defer
        finally:
            huey.storage.close()

    async def work(self, config: WorkerConfig, recorder: Recorder, stop: asyncio.Event) -> None:
        logging.getLogger("huey").setLevel(logging.CRITICAL)
        huey, _ = _huey(config.dsn, recorder)
        consumer = huey.create_consumer(workers=1, worker_type="thread", periodic=False)
        # Consumer.start installs huey's signal handlers for its own run loop, which we do not run:
        # the worker's (pg_claimcheck.libs._worker) stay in charge, and stop it as huey's SIGINT would.
        ours = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
        consumer.start()
        for sig, handler in ours.items():
            signal.signal(sig, handler)
        await stop.wait()
        await asyncio.to_thread(consumer.stop, graceful=True)  # huey's graceful stop: the task in hand finishes
        huey.storage.close()

    def outcome(self, conn: psycopg.Connection) -> TableOutcome:
        done, queued = conn.execute(LIB_QUERIES["huey_outcome"], {"queue": QUEUE_NAME}).fetchone() or (0, 0)
        running = max(self.enqueued - done - queued, 0)
        return TableOutcome(done=done, queued=queued, running=running, failed=0, max_attempts=1 if done else 0)

    def unfinished(self, conn: psycopg.Connection, limit: int) -> list[dict]:
        rows = conn.execute(LIB_QUERIES["huey_unfinished"],
                            {"queue": QUEUE_NAME, "total": self.enqueued, "limit": limit}).fetchall()
        return [{"job": key, "library_id": task_id(key), "status": status, "attempts": None, "owner": ""}
                for key, status in rows]

    def final_status(self, conn: psycopg.Connection, ids: dict[int, object]) -> dict[int, tuple[str, int]]:
        rows = conn.execute(LIB_QUERIES["huey_status"], {"queue": QUEUE_NAME, "keys": list(ids)}).fetchall()
        return {key: (status, 1) for key, status in rows}

    def pgbench_cycle(self, work_us: int) -> LibraryCycle:
        """One task as a consumer thread takes it (see the module docstring)."""
        self.require_copied_from(SQL_COPIED_FROM, "PostgresStorage")
        huey, record = _huey("", create_tables=False)  # for its names and serializer: never connected
        storage = huey.storage
        queue = sql.Literal(QUEUE_NAME).as_string()
        task = self._task(record, 0)
        revoke = [k.replace(task.id, "%s") for k in huey._revoke_keys(task)]  # the task's revoke id holds its id

        def statement(name: str, table: str, params: dict) -> str:
            return substitute(HUEY_SQL[name].format(t=table), {"queue": queue, **params}.__getitem__)

        key = "CAST(:cc_key AS text)"  # pgbench's variable: a parameter of the prepared statement
        keys = "ARRAY[" + ", ".join(pgbench_literal(sql.Literal(k).as_string()).replace("%s", "' || " + key + " || '")
                                      for k in revoke) + "]"
        dequeue = statement("dequeue", storage.table_task, {})
        lines = [rows_as_cte(dequeue, "cc_rows", "SELECT count(*) AS cc_n, coalesce(max(md5(data)), '') AS cc_key "
                                                 "FROM cc_rows"), "\\gset", "\\if :cc_n > 0",
                 statement("peek_many", storage.table_kv, {"keys": keys}) + ";"]
        if work_us:
            lines.append(f"\\sleep {work_us} us")
        value = "'\\x" + huey.serializer.serialize(True).hex() + "'::bytea"
        lines += [statement("put_data", storage.table_kv, {"key": key, "value": value}) + ";", "\\endif"]
        return LibraryCycle(script="\n".join(lines) + "\n", jobs=1,
                            statements=f"huey {self.version()} PostgresStorage._dequeue, peek_many (is_revoked), "
                                       f"put_data (the result), copied from huey {SQL_COPIED_FROM} (sql/huey.sql)")


ADAPTER = HueyAdapter()
