"""Absurd under the ledger (`pip install 'pg-claimcheck[absurd]'`): Armin Ronacher's Postgres-only durable
workflow system, its Python SDK (`absurd-sdk`) and its schema installed by its own CLI (`absurdctl`).

Why Absurd: a durable-execution system that is one SQL file of stored functions and nothing else (no
broker, no coordinator service); the SDKs only call them. Its users install the schema with
`absurdctl init` and make a queue with `absurdctl create-queue` (docs/quickstart.md, "1. Install the
Schema", "2. Create a Queue"); `absurdctl` is on PyPI beside the SDK and applies the SQL bundled in
it with `psql`, so the adapter does exactly that.

What it promises, in its own words (docs/concepts.md, "Workers", at 0.5.1): "A worker polls a queue
for pending tasks, claims them with a time-limited lease, and executes the registered handler. The
lease (claim timeout) is automatically extended whenever a checkpoint is written. If a worker crashes
or fails to make progress before the lease expires, the task becomes available for another worker to
pick up. This means brief overlapping execution is possible — design your steps to tolerate it."
And of retries (docs/concepts.md, "Steps"): "Code outside steps may execute multiple times across
retries." The claim is `absurd.claim_task` (`FOR UPDATE SKIP LOCKED` over the queue's runs; the same
call first fails the runs whose `claim_expires_at` passed, which schedules their next attempt), and a
late `complete_run` of a run that was failed meanwhile is refused (SQLSTATE AB002), which the SDK
swallows: the lease is fenced.

So the ledger judges Absurd at-least-once with redelivery after its lease: a task whose worker died,
or made no progress (here: blocked its event loop) past the claim timeout, may run again, beside the
stalled one too ("brief overlapping execution"); any other second execution is a double execution. The
lease runs from the claim (a task writes no checkpoint in between: the recording task has no steps),
which is `claim_lease_s`.

Deployed as its docs deploy it: N worker processes, each one `AsyncAbsurd.start_worker` with the SDK's
defaults (worker id `<host>:<pid>`, concurrency 1, poll every 0.25 s, claim timeout 120 s, 5 attempts)
on one autocommitted connection. Under `--faults` the claim timeout is FAULTS_CLAIM_TIMEOUT_S, so a short
run sees a stalled or orphaned task come back.

The pgbench cycle (`--pgbench`) is one turn of that loop: the SDK's `claim_task` call (one task, the
default concurrency) and, once the handler returned, its `complete_run` call, each autocommitted: the
stored functions themselves, as `absurdctl init` installed them; the calls are copies in `sql/absurd.sql`,
made from `SQL_COPIED_FROM`.
"""
from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import psycopg
from absurd_sdk import Absurd, AsyncAbsurd
from psycopg import sql

from pg_claimcheck.contract.dialect import substitute
from pg_claimcheck.contract.sqlfile import load_queries
from pg_claimcheck.errors import UsageError
from pg_claimcheck.libs._adapter import LibraryAdapter, LibraryCycle, Recorder, WorkerConfig, fetch_then_complete

QUEUE_NAME = "claimcheck"
TASK_NAME = "claimcheck-record"
CLAIM_TIMEOUT_S = 120
"""`start_worker`'s default claim timeout (absurd_sdk, AsyncAbsurd.start_worker)."""
FAULTS_CLAIM_TIMEOUT_S = 2
"""Under --faults: the claim timeout (whole seconds, as the SDK takes it)."""
ENQUEUE_COMMIT_EVERY = 1_000
INSTALL_TIMEOUT_S = 120
SQL_COPIED_FROM = "0.5.1"
"""The absurd-sdk version whose absurd_sdk/__init__.py the calls of sql/absurd.sql were copied from."""
ABSURD_SQL: dict[str, str] = load_queries(Path(__file__).parent.parent / "sql" / "absurd.sql")


def _without_password(dsn: str) -> tuple[str, dict[str, str]]:
    """`dsn` for absurdctl's command line, and the environment carrying its password (PGPASSWORD, which
    absurdctl hands to psql): a command line is anyone's to read in the process list."""
    params = {k: v for k, v in psycopg.conninfo.conninfo_to_dict(dsn).items() if v is not None}
    password = params.pop("password", None)
    env = {**os.environ, **({"PGPASSWORD": str(password)} if password is not None else {})}
    return psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in params.items()}), env


class AbsurdAdapter(LibraryAdapter):
    name = "absurd"
    distribution = "absurd-sdk"
    promise = ("a worker claims a task with a time-limited lease; \"if a worker crashes or fails to make progress "
               "before the lease expires, the task becomes available for another worker to pick up. This means brief "
               "overlapping execution is possible\": at-least-once")
    docs = ("https://github.com/earendil-works/absurd/blob/0.5.1/docs/concepts.md (Workers, Steps); "
            "docs/sdks/python.md (start_worker)")
    delivery = "at-least-once"
    lease_s = float(FAULTS_CLAIM_TIMEOUT_S)
    # The lease runs from the claim (claim_expires_at = claim + timeout); the server's claim comes a little
    # before the task's start, which is all the ledger sees of it (the SDK gives no claim time): a tenth off.
    stall_release_s = FAULTS_CLAIM_TIMEOUT_S * 0.9
    claim_lease_s = FAULTS_CLAIM_TIMEOUT_S * 0.9
    completion_lag_s = 0.2
    """complete_run's round trip after the handler returned."""

    def install(self, dsn: str) -> None:
        """`absurdctl init` (the schema bundled in absurdctl), then `absurdctl create-queue`, as the quickstart does."""
        ctl = shutil.which("absurdctl") or str(Path(sys.executable).parent / "absurdctl")
        if not Path(ctl).exists():
            raise UsageError("claimcheck lib absurd installs Absurd's schema with its own CLI, absurdctl, which is not "
                             "installed here: pip install 'pg-claimcheck[absurd]' installs it with the SDK")
        if shutil.which("psql") is None:
            raise UsageError("claimcheck lib absurd installs Absurd's schema with absurdctl, which runs psql, and there "
                             "is no psql on PATH (Debian: apt-get install postgresql-client)")
        conninfo, env = _without_password(dsn)
        for argv in (["init", "-d", conninfo], ["create-queue", "-d", conninfo, QUEUE_NAME]):
            done = subprocess.run([ctl, *argv], capture_output=True, text=True, env=env, timeout=INSTALL_TIMEOUT_S)
            if done.returncode != 0:
                raise UsageError(f"absurdctl {argv[0]} failed (exit {done.returncode}): "
                                 f"{(done.stderr or done.stdout).strip()[-600:] or 'no output'}")

    def enqueue(self, dsn: str, keys: range) -> list:
        """`Absurd.spawn` per key on a connection of ours, committed every ENQUEUE_COMMIT_EVERY (the SDK takes an
        existing connection, and then leaves its transactions to its owner)."""
        ids = []
        with psycopg.connect(dsn) as conn:
            app = Absurd(conn, queue_name=QUEUE_NAME)
            for n, key in enumerate(keys, 1):
                ids.append(str(app.spawn(TASK_NAME, {"key": key}, queue=QUEUE_NAME)["task_id"]))
                if n % ENQUEUE_COMMIT_EVERY == 0:
                    conn.commit()
            conn.commit()
        return ids

    feeds = True

    @contextlib.asynccontextmanager
    async def feeder(self, dsn: str):
        app = AsyncAbsurd(dsn, queue_name=QUEUE_NAME)  # its own autocommitted connection: each spawn commits
        try:
            async def defer(key: int) -> str:
                return str((await app.spawn(TASK_NAME, {"key": key}, queue=QUEUE_NAME))["task_id"])

            yield defer
        finally:
            await app.close()

    async def work(self, config: WorkerConfig, recorder: Recorder, stop: asyncio.Event) -> None:
        app = AsyncAbsurd(config.dsn, queue_name=QUEUE_NAME)

        @app.register_task(TASK_NAME)
        async def record(params, ctx) -> None:
            # The SDK gives a handler no public attempt number (the fault report reads t_claimcheck.attempts)
            await recorder.execute(int(params["key"]), ctx.task_id, None)

        timeout = FAULTS_CLAIM_TIMEOUT_S if config.faults else CLAIM_TIMEOUT_S
        loop = asyncio.create_task(app.start_worker(claim_timeout=timeout))
        stopping = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait({loop, stopping}, return_when=asyncio.FIRST_COMPLETED)
            app.stop_worker()  # Absurd's graceful stop: the loop ends after the task in hand
            await loop  # raises what ended it (its connection terminated, the server restarted)
        finally:
            stopping.cancel()
            with contextlib.suppress(Exception):
                await app.close()

    def pgbench_cycle(self, work_us: int) -> LibraryCycle:
        """One claim of one task, its work, its completion (see the module docstring); each client a worker id of its own."""
        self.require_copied_from(SQL_COPIED_FROM, "AsyncAbsurd")
        queue = sql.Literal(QUEUE_NAME).as_string()
        claim = substitute(ABSURD_SQL["claim"], {
            "queue": queue, "worker_id": "'claimcheck-pgbench-' || :client_id",
            "claim_timeout": str(CLAIM_TIMEOUT_S), "batch_size": "1"}.__getitem__)
        complete = substitute(ABSURD_SQL["complete"], {
            "queue": queue, "run_id": "CAST(:cc_run AS uuid)", "result": "'null'"}.__getitem__)
        return fetch_then_complete(
            claim, "SELECT count(*) AS cc_n, max(run_id::text) AS cc_run FROM cc_rows", complete, work_us, 1,
            f"absurd-sdk {self.version()} AsyncAbsurd.claim_tasks (absurd.claim_task, one task: concurrency 1) and "
            f"complete_run, each autocommitted, copied from absurd-sdk {SQL_COPIED_FROM} (sql/absurd.sql)")


ADAPTER = AbsurdAdapter()
