"""taskiq with taskiq-postgres's PostgreSQL broker under the ledger (`pip install 'pg-claimcheck[taskiq-postgres]'`).

Why this broker: taskiq (an asyncio task queue) ships no PostgreSQL broker of its own, and four packages offer
one (taskiq-postgres, taskiq-postgresql, taskiq-pg, taskiq-psqlpy). taskiq-postgres (danfimov/taskiq-postgres)
is the one taskiq's documentation links (docs/available-components/schedule-sources.md, "PostgreSQL schedule
source"), the most recently released (0.9.1), and the one with a broker for all four drivers; taskiq-pg
(2025-03) and taskiq-psqlpy (2025-08, result backend only) are older and smaller. Its psycopg 3 driver is
used here, as claimcheck's own.

What it promises: taskiq-postgres's docs (its README, docs/tutorial/broker.md) describe a "message broker
using PostgreSQL LISTEN/NOTIFY" and make no delivery statement. taskiq's own contract is its acknowledgement
(taskiq/acks.py; `taskiq worker --ack-type`, default `when_saved`): "the message will be acknowledged when the
task will be saved only after it's saved in the result backend", `when_received` "right when it's received,
before it's executed". A message acknowledged only once its task ran is one the broker keeps until then:
at-least-once. The code (`taskiq_pg/psycopg/broker.py`): `kick` inserts the message (`pending`) and sends
`NOTIFY taskiq, '<id>'`; each worker process claims the id it is notified of with `UPDATE ... SET status =
'processing' WHERE id = %s AND status = 'pending'`, and the ack deletes the row. Nothing else reads the table:
a message whose NOTIFY no worker heard (kicked while none listened) stays `pending`, and one whose worker died
stays `processing`; nothing times one out.

Everything goes through taskiq's public API and its CLI: `PsycopgBroker.startup` creates the table, a task's
`kicker().with_broker(...).with_task_id(...).kiq()` enqueues (task id `cc<key>`), and each worker is
`taskiq worker pg_claimcheck.libs.taskiq_postgres:broker` with taskiq's defaults (two worker processes, ack
`when_saved`, no result backend), as taskiq's docs run it; the broker reads the run's DSN from its
environment (pg_claimcheck.libs._adapter.command_env).
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import os

from taskiq import Context, TaskiqDepends
from taskiq_pg.psycopg import PsycopgBroker

from pg_claimcheck.libs._adapter import (
    COMMAND_WORKER_ENV,
    CommandWorker,
    ForgetsJobs,
    NoLease,
    WorkerConfig,
    command_env,
    command_recorder,
    say_hello,
    spawn_command,
)
from pg_claimcheck.verdict.result import TableOutcome

TABLE = "taskiq_messages"
"""taskiq-postgres's default table and channel."""
CHANNEL = "taskiq"
BROKER = "pg_claimcheck.libs.taskiq_postgres:broker"


def _worker_dsn() -> str:
    return json.loads(os.environ[COMMAND_WORKER_ENV])["dsn"]


broker = PsycopgBroker(dsn=_worker_dsn, table_name=TABLE, channel_name=CHANNEL)
"""The worker command's broker (`taskiq worker ...:broker`): its DSN read from the environment when it starts."""


@broker.task(task_name="claimcheck_record")
async def claimcheck_record(n: int, context: Context = TaskiqDepends()) -> bool:  # noqa: B008 (taskiq's injection)
    await command_recorder().execute(n, context.message.task_id, None)
    return True


say_hello()  # `taskiq worker` has imported its broker: it is up (CommandWorker)


def _kick(via: PsycopgBroker, key: int):
    return claimcheck_record.kicker().with_broker(via).with_task_id(f"cc{key}").kiq(n=key)


class TaskiqPostgresAdapter(CommandWorker, ForgetsJobs, NoLease):
    name = "taskiq-postgres"
    distribution = "taskiq-postgres"
    promise = ("taskiq acknowledges a message only after its task ran and its result was saved (--ack-type "
               "when_saved, the default); the broker keeps the message until then: at-least-once")
    docs = ("taskiq/acks.py (AcknowledgeType) and `taskiq worker --ack-type`; taskiq-postgres README and "
            "taskiq_pg/psycopg/broker.py (kick, listen)")

    def install(self, dsn: str) -> None:
        async def go() -> None:
            via = PsycopgBroker(dsn=dsn, table_name=TABLE, channel_name=CHANNEL)
            await via.startup()  # CREATE TABLE IF NOT EXISTS, its own DDL
            await via.shutdown()

        asyncio.run(go())

    def enqueue(self, dsn: str, keys: range) -> list:
        async def go() -> list:
            via = PsycopgBroker(dsn=dsn, table_name=TABLE, channel_name=CHANNEL)
            await via.startup()
            try:
                return [(await _kick(via, k)).task_id for k in keys]
            finally:
                await via.shutdown()

        ids = asyncio.run(go())
        self.seeded_now(len(keys))
        return ids

    feeds = True

    @contextlib.asynccontextmanager
    async def feeder(self, dsn: str):
        via = PsycopgBroker(dsn=dsn, table_name=TABLE, channel_name=CHANNEL)
        await via.startup()
        try:
            async def defer(key: int) -> str:
                return (await _kick(via, key)).task_id

            yield defer
        finally:
            await via.shutdown()

    def spawn(self, config: WorkerConfig, stderr):
        return spawn_command(["taskiq", "worker", BROKER], command_env(config), stderr)

    def outcome(self, conn) -> TableOutcome:
        from pg_claimcheck.libs._sql import LIB_QUERIES

        queued, running = conn.execute(LIB_QUERIES["taskiq_postgres_outcome"]).fetchone()
        done = max(self.enqueued - queued - running, 0)  # an acknowledged message's row is deleted
        return TableOutcome(done=done, queued=queued, running=running, failed=0, max_attempts=1 if done else 0)


ADAPTER = TaskiqPostgresAdapter()
