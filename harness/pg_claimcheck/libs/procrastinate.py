"""procrastinate under the ledger (`pip install 'pg-claimcheck[procrastinate]'`).

What it promises, from its docs (https://procrastinate.readthedocs.io/en/stable/):
- A job is fetched by one worker: `procrastinate_fetch_job` takes the next `todo` job with
  `FOR UPDATE SKIP LOCKED` and sets it `doing` in one statement ("Discussions: How does
  procrastinate work?"), so two workers never run a job at once.
- A job whose worker died stays `doing`: "Retry stalled jobs" (howto/production/retry_stalled_jobs)
  tells users to run `job_manager.get_stalled_jobs()` (jobs of workers whose heartbeat is older
  than `seconds_since_heartbeat`) and `retry_job()` periodically. So delivery is at-least-once
  when users follow that how-to: a job may run again after its worker stopped heartbeating, and
  never otherwise.
The same is written in the installed package: `JobManager.get_stalled_jobs` ("jobs of workers
that have not sent a heartbeat for longer than seconds_since_heartbeat") and
`App.run_worker_async` (`update_heartbeat_interval`, `stalled_worker_timeout`).
Under --faults the coordinator runs exactly that how-to every `RECOVER_EVERY_S` (see
:meth:`ProcrastinateAdapter.recover`), with the heartbeat settings scaled down so a short run sees it.

Everything below goes through procrastinate's public API: `SchemaManager.apply_schema` installs,
`Task.batch_defer_async` enqueues, `App.run_worker_async` is its own worker loop.

The pgbench cycle (`--pgbench`) is the loop of `Worker._fetch_and_process_jobs` at concurrency 1
(procrastinate's default, and ours): `fetch_job`, then, once the task returned, `finish_job` with
status `succeeded` and `delete_job` false (`Worker._persist_job_status`), each statement in a
transaction of its own: the connector's psycopg pool hands out connections that are not in
autocommit, psycopg opens the transaction and the pool commits it when the connection is given
back. Both statements are read from `procrastinate.sql.queries` at run time, as is
`register_worker`, which the coordinator runs once per client (each worker registers when it
starts; `fetch_job` takes the worker's id). Left out: the pool's connection check before each
statement (psycopg_pool's empty query, not procrastinate's SQL) and what runs on timers (the
heartbeat every 10 s, the abort poll every 5 s while a job runs).
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

import procrastinate
from procrastinate.sql import queries as PROCRASTINATE_QUERIES

from pg_claimcheck.contract.dialect import rows_as_cte, substitute
from pg_claimcheck.errors import UsageError
from pg_claimcheck.libs._adapter import LibraryAdapter, LibraryCycle, Recorder, WorkerConfig

TASK_NAME = "claimcheck_record"
ENQUEUE_CHUNK = 1_000
FAULT_LEASE_S = 2.0
"""Under --faults: a worker silent this long is stalled (procrastinate's default is 30 s)."""
FAULT_HEARTBEAT_S = 0.5
"""Under --faults: the worker's heartbeat interval (procrastinate's default is 10 s)."""
POLL_S = 0.5
"""fetch_job_polling_interval: LISTEN/NOTIFY wakes workers; the poll is the fallback."""
QUIET_S = 900.0
SUSPENDABLE = {"fetch_job_polling_interval": QUIET_S, "update_heartbeat_interval": QUIET_S,
               "stalled_worker_timeout": 3 * QUIET_S}
"""`lib procrastinate --idle W --idle-setting suspendable`: Worker's fallback poll (default 5 s) and heartbeat (10 s)
every 15 min, the stall timeout (30 s) kept above the heartbeat (procrastinate/worker.py, Worker.__init__)."""


def _app(dsn: str) -> procrastinate.App:
    return procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn))


def _knobs(config: WorkerConfig) -> dict:
    """Ours for a run with jobs; none for `--idle` (the library's defaults), or SUSPENDABLE."""
    return {"": {"fetch_job_polling_interval": POLL_S}, "defaults": {}, "suspendable": SUSPENDABLE}[config.idle]


class ProcrastinateAdapter(LibraryAdapter):
    name = "procrastinate"
    distribution = "procrastinate"
    suspendable = ("fetch_job_polling_interval=900, update_heartbeat_interval=900, stalled_worker_timeout=2700 "
                   "(defaults 5, 10 and 30 s: procrastinate/worker.py, Worker.__init__); new jobs still wake it by "
                   "LISTEN/NOTIFY (listen_notify=True)")
    promise = ("one worker per job (fetch with FOR UPDATE SKIP LOCKED); a job of a worker whose heartbeat "
               "stopped is retried by the user's periodic get_stalled_jobs + retry_job: at-least-once")
    docs = "https://procrastinate.readthedocs.io/en/stable/howto/production/retry_stalled_jobs.html"
    lease_s = FAULT_LEASE_S
    stall_release_s = FAULT_LEASE_S - FAULT_HEARTBEAT_S

    def install(self, dsn: str) -> None:
        app = _app(dsn)
        with app.open():
            app.schema_manager.apply_schema()

    def enqueue(self, dsn: str, keys: range) -> list:
        async def go() -> list:
            app = _app(dsn)
            task = app.task(name=TASK_NAME)(_never_called)
            ids = []
            async with app.open_async():
                for start in range(0, len(keys), ENQUEUE_CHUNK):
                    ids += await task.batch_defer_async(*({"key": k} for k in keys[start:start + ENQUEUE_CHUNK]))
            return ids

        return asyncio.run(go())

    feeds = True

    @contextlib.asynccontextmanager
    async def feeder(self, dsn: str):
        app = _app(dsn)
        task = app.task(name=TASK_NAME)(_never_called)
        async with app.open_async():
            async def defer(key: int) -> int:
                return await task.defer_async(key=key)

            yield defer

    async def work(self, config: WorkerConfig, recorder: Recorder, stop: asyncio.Event) -> None:
        logging.getLogger("procrastinate").setLevel(logging.ERROR)
        app = _app(config.dsn)

        @app.task(name=TASK_NAME, pass_context=True)
        async def record(context: procrastinate.JobContext, key: int) -> None:
            await recorder.execute(key, context.job.id, context.job.attempts)

        heartbeat = {"update_heartbeat_interval": FAULT_HEARTBEAT_S,
                     "stalled_worker_timeout": FAULT_LEASE_S} if config.faults else {}
        async with app.open_async():
            worker = asyncio.create_task(app.run_worker_async(
                name=f"w{config.worker:02d}", wait=True, install_signal_handlers=False,
                **_knobs(config), **heartbeat))
            stopping = asyncio.create_task(stop.wait())
            await asyncio.wait({worker, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if not worker.done():
                worker.cancel()  # procrastinate's graceful stop: the job in hand finishes first
            await asyncio.gather(worker, return_exceptions=True)
            stopping.cancel()
            if worker.done() and not worker.cancelled() and worker.exception():
                raise worker.exception()

    def recover(self, dsn: str, dead: dict[int, Path]) -> list[int]:
        """The how-to's periodic task, run by the coordinator: retry the jobs of stalled workers."""
        async def go() -> list[int]:
            app = _app(dsn)
            async with app.open_async():
                stalled = await app.job_manager.get_stalled_jobs(seconds_since_heartbeat=FAULT_LEASE_S)
                keys = []
                for job in stalled:
                    await app.job_manager.retry_job(job)
                    keys.append(int(job.task_kwargs["key"]))
                return keys

        try:
            return asyncio.run(go())
        except procrastinate.exceptions.ConnectorException:
            return []  # the server is restarting: the next round recovers

    def pgbench_cycle(self, work_us: int) -> LibraryCycle:
        """fetch_job, the task's work, finish_job: each statement a transaction (see the module docstring)."""
        try:
            fetch, finish = PROCRASTINATE_QUERIES["fetch_job"], PROCRASTINATE_QUERIES["finish_job"]
            register = PROCRASTINATE_QUERIES["register_worker"]
        except KeyError as exc:
            raise UsageError(f"claimcheck lib procrastinate --pgbench reads the worker's statements from "
                             f"procrastinate.sql.queries, and procrastinate {self.version()} has no {exc} there; "
                             "run it without --pgbench") from None
        worker_id = "(CAST(:cc_workers AS bigint[]))[:client_id + 1]"
        # The worker fetches from every queue (no `queues` given), so procrastinate passes NULL.
        fetch = substitute(fetch.rstrip("; \n"), {"queues": "NULL", "worker_id": worker_id}.__getitem__)
        finish = substitute(finish.rstrip("; \n"), {"job_id": "(CAST(:cc_ids AS bigint[]))[1]", "status": "'succeeded'",
                                     "delete_job": "false"}.__getitem__)
        # fetch_job always returns one row, all NULL when the queue is empty: count the ids it took.
        lines = ["BEGIN;",
                 rows_as_cte(fetch, "cc_rows", "SELECT count(id) AS cc_n, coalesce(array_agg(id) FILTER "
                                               "(WHERE id IS NOT NULL), '{}') AS cc_ids FROM cc_rows"),
                 "\\gset",
                 "COMMIT;",
                 "\\if :cc_n > 0"]
        if work_us:
            lines.append(f"\\sleep {work_us} us")
        lines += ["BEGIN;", finish + ";", "COMMIT;", "\\endif"]
        return LibraryCycle(script="\n".join(lines) + "\n", jobs=1, per_client={"cc_workers": register},
                            statements=f"procrastinate {self.version()} procrastinate.sql.queries: register_worker "
                                       "(once per client), fetch_job, finish_job")


async def _never_called(key: int) -> None:  # the enqueuer only needs the task's name
    raise AssertionError("the enqueuing process runs no jobs")


ADAPTER = ProcrastinateAdapter()
