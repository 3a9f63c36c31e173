"""DBOS queues under the ledger (`pip install 'pg-claimcheck[dbos]'`): durable workflows on PostgreSQL, `dbos`.

Why DBOS: a durable-execution library whose queues run on its PostgreSQL system database alone (no
broker); its workflows are what users put on a queue.

What it promises, from its docs (https://docs.dbos.dev/python/reference/contexts, `start_workflow`:
once the workflow is durably created "the workflow is guaranteed to run to completion even if the app
is interrupted"; https://docs.dbos.dev/production/self-hosting/workflow-recovery: "each time you
restart your application's process, DBOS recovers all workflows that were executing before the restart
(all PENDING workflows)"). A queue hands a workflow to one process with `FOR UPDATE SKIP LOCKED`
(`SystemDatabase.start_queued_workflows`, ENQUEUED -> PENDING under the process's executor id), and
nothing times a running workflow out: there is no lease. So delivery is at-least-once, the redelivery
coming only from a process's startup recovery, which re-enqueues every PENDING workflow of its executor
id (`dbos/_recovery.py`).

Everything goes through DBOS's public API: `DBOS.migrate` creates the system tables, `DBOSClient.enqueue`
enqueues (workflow id `cc<key>`), and each worker process is one DBOS application (`DBOS(config=...)`,
`DBOS.launch()`) polling the queue with its default interval (1 s). The executor id is DBOS's default,
`local`, in every process, as a user who follows the single-server guide and starts several processes
runs it: the docs ask for `DBOS__VMID` per process only "in a distributed setting". A replacement worker
therefore recovers every PENDING workflow of `local`, those other live processes are running included.
The workflow is synchronous (DBOS runs it on its thread pool), as in DBOS's guides.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging

import psycopg
import sqlalchemy as sa
from dbos import DBOS, DBOSClient, EnqueueOptions

from pg_claimcheck.libs._adapter import NoLease, Recorder, WorkerConfig

QUEUE_NAME = "claimcheck"
WORKFLOW = "claimcheck_record"
CONCURRENCY = 10
"""Workflows one process runs at once (`worker_concurrency`; unset, DBOS takes as many as its threads allow)."""

_recorder: Recorder | None = None
"""The worker process's recorder, for the workflow (registered at import, as DBOS asks)."""

@DBOS.workflow(name=WORKFLOW)
def claimcheck_record(n: int) -> bool:
    assert _recorder is not None, "the workflow runs only in a worker, which has its recorder"
    asyncio.run(_recorder.execute(n, DBOS.workflow_id, None))
    return True


def database_url(dsn: str) -> str:
    """A libpq connection string as the SQLAlchemy URL DBOS takes (`system_database_url`)."""
    params = {k: str(v) for k, v in psycopg.conninfo.conninfo_to_dict(dsn).items() if v is not None}
    query = {k: v for k, v in params.items() if k not in ("user", "password", "port", "dbname")}
    url = sa.engine.URL.create("postgresql", username=params.get("user"), password=params.get("password"),
                               port=int(params["port"]) if params.get("port") else None,
                               database=params.get("dbname"), query=query)
    return url.render_as_string(hide_password=False)


def _key(workflow_id: str) -> int:
    return int(workflow_id[2:])


class DbosAdapter(NoLease):
    name = "dbos"
    distribution = "dbos"
    promise = ("a workflow once enqueued is guaranteed to run to completion even if the app is interrupted: a "
               "restarted process recovers every PENDING workflow of its executor id; no lease, no timeout: "
               "at-least-once")
    docs = ("https://docs.dbos.dev/python/reference/contexts (start_workflow); "
            "https://docs.dbos.dev/production/self-hosting/workflow-recovery; dbos/_recovery.py")
    delivery = "at-least-once"

    def install(self, dsn: str) -> None:
        DBOS.migrate(database_url(dsn))

    def enqueue(self, dsn: str, keys: range) -> list:
        client = DBOSClient(system_database_url=database_url(dsn))
        try:
            return [client.enqueue(self._options(k), k).get_workflow_id() for k in keys]
        finally:
            client.destroy()

    @staticmethod
    def _options(key: int) -> EnqueueOptions:
        return {"queue_name": QUEUE_NAME, "workflow_name": WORKFLOW, "workflow_id": f"cc{key}"}

    feeds = True

    @contextlib.asynccontextmanager
    async def feeder(self, dsn: str):
        client = DBOSClient(system_database_url=database_url(dsn))
        try:
            async def defer(key: int) -> str:
                return (await client.enqueue_async(self._options(key), key)).get_workflow_id()

            yield defer
        finally:
            client.destroy()

    async def work(self, config: WorkerConfig, recorder: Recorder, stop: asyncio.Event) -> None:
        global _recorder
        _recorder = recorder
        logging.getLogger("dbos").setLevel(logging.CRITICAL)
        # DBOS names its connections `dbos_transact` (connect_args, which win over the URL's): the run's name
        # for this worker instead, by which the sampler and the terminate fault find its backends.
        name = psycopg.conninfo.conninfo_to_dict(config.dsn).get("application_name", "dbos_transact")
        DBOS(config={"name": "claimcheck", "system_database_url": database_url(config.dsn),
                     "db_engine_kwargs": {"connect_args": {"application_name": name}},
                     "run_migrations": False, "log_level": "CRITICAL"})
        await asyncio.to_thread(DBOS.launch)
        # DBOS's queues are declared on a launched instance (its system database keeps their settings).
        await asyncio.to_thread(DBOS.register_queue, QUEUE_NAME, worker_concurrency=CONCURRENCY,
                                on_conflict="always_update")
        await stop.wait()
        # DBOS's shutdown: stops dequeuing, waits this long for the workflows in hand.
        await asyncio.to_thread(DBOS.destroy, workflow_completion_timeout_sec=5)


ADAPTER = DbosAdapter()
