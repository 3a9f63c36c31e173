"""django-q2 with its ORM broker under the ledger (`pip install 'pg-claimcheck[django-q2]'`).

Why: the maintained fork of Django Q, a Django task queue whose ORM broker needs no broker but the
project's database; among the most used Django queues after Celery.

What it promises, from its docs (https://django-q2.readthedocs.io/en/master/brokers.html; docs/brokers.rst
of django-q2/django-q2): brokers with message receipts, the ORM broker among them, "guarantee delivery by
waiting for the cluster to send a receipt after the task has been processed. In case a receipt has not been
received after a set time, the task package is put back in the queue", with "In case a task is worked on
twice, the task result will be updated with the latest results" and "Retry time includes time the task
spends waiting in the clusters internal queue". The code (`django_q/brokers/orm.py`, `ORM.dequeue`) claims a
row of `django_q_ormq` whose `lock` is past by a conditional `UPDATE ... SET lock = now + retry WHERE id = ...
AND lock = <the lock it read>`, and deletes the row when the cluster's monitor acknowledges the task. So
delivery is at-least-once with a lease that runs from the claim (`retry`, 60 s by default), with no heartbeat:
a task still running (or still waiting in the cluster's internal queue) `retry` seconds after its claim is
presented again, the earlier execution still running.

Everything goes through django-q2's public API and its command: `manage.py migrate` creates its tables,
`async_task` enqueues (the task named `cc<key>`, django-q2's `task_name`), and each worker process is one
cluster, `manage.py qcluster` (its sentinel, pusher, monitor and CLUSTER_WORKERS worker processes), several
clusters on one ORM broker as its docs deploy them. django-q2's defaults stand (`timeout` unset,
`ack_failures` off, `save_limit` 250, `queue_limit` workers squared, `bulk` 1, `poll` 0.2 s) but under --faults,
where `retry` is FAULT_RETRY_S so a short run sees a stalled task presented again.
django-q2 deletes a task's `django_q_ormq` row when it is acknowledged and keeps only the last `save_limit`
results, so the adapter counts the jobs it enqueued (ForgetsJobs): done = enqueued - rows left.
"""
from __future__ import annotations

import asyncio
import contextlib

import django_q  # noqa: F401  (the library: missing, the adapter says which extra installs it)

from pg_claimcheck.libs import _django
from pg_claimcheck.libs._adapter import CommandWorker, ForgetsJobs, WorkerConfig, command_recorder, spawn_command
from pg_claimcheck.libs._sql import LIB_QUERIES

CLUSTER_NAME = "claimcheck"
"""The cluster's name, which is the ORM broker's queue (`django_q_ormq.key`)."""
CLUSTER_WORKERS = 2
"""Worker processes per cluster: django-q2's default is the host's CPU count (2 here), written down so a
run reads the same on every machine."""
FAULT_RETRY_S = 5
"""Under --faults: `retry`, the lease from the claim (default 60 s), in whole seconds."""
TASK = "pg_claimcheck.libs.django_q2.claimcheck_record"


def claimcheck_record(n: int) -> bool:
    """The recording task, run in a worker process of a cluster (by its dotted path)."""
    asyncio.run(command_recorder().execute(n, f"cc{n}", None))  # django-q2 runs tasks synchronously
    return True


class DjangoQ2Adapter(CommandWorker, ForgetsJobs):
    name = "django-q2"
    distribution = "django-q2"
    promise = ("the ORM broker guarantees delivery with receipts: a task not acknowledged `retry` seconds after its "
               "claim is put back in the queue (a task may be worked on twice): at-least-once, lease from the claim")
    docs = ("https://django-q2.readthedocs.io/en/master/brokers.html (docs/brokers.rst); "
            "https://django-q2.readthedocs.io/en/master/configure.html#retry; django_q/brokers/orm.py")
    lease_s = float(FAULT_RETRY_S)
    stall_release_s = float(FAULT_RETRY_S)
    claim_lease_s = float(FAULT_RETRY_S)  # `lock = now + retry` at the claim, never renewed

    def env(self, dsn: str, worker: WorkerConfig | None = None) -> dict[str, str]:
        cluster = {"name": CLUSTER_NAME, "orm": "default", "workers": CLUSTER_WORKERS, "log_level": "WARNING"}
        if worker is not None and worker.faults:
            cluster["retry"] = FAULT_RETRY_S
        return _django.environment(dsn, ["django_q"], {"Q_CLUSTER": cluster}, worker)

    def install(self, dsn: str) -> None:
        _django.manage(self.env(dsn), "migrate", "--noinput", "--verbosity", "0")

    def enqueue(self, dsn: str, keys: range) -> list:
        ids = _django.enqueue_command(self.env(dsn), self.name, keys)
        self.seeded_now(len(keys))
        return ids

    def enqueue_here(self, keys: range) -> list[str]:
        """In the run's project (pg_claimcheck.libs._django.main): one `async_task` per key."""
        from django_q.tasks import async_task

        return [async_task(TASK, k, task_name=f"cc{k}") for k in keys]

    feeds = True

    @contextlib.asynccontextmanager
    async def feeder(self, dsn: str):
        _django.setup_here(self.env(dsn))  # the producer: a process forked for this run
        from asgiref.sync import sync_to_async
        from django.db import connections
        from django_q.tasks import async_task

        # async_task is synchronous (one INSERT, autocommitted): Django runs the ORM off the event loop, in one thread
        enqueue = sync_to_async(async_task)
        try:
            async def defer(key: int) -> str:
                return await enqueue(TASK, key, task_name=f"cc{key}")

            yield defer
        finally:
            await sync_to_async(connections.close_all)()

    def spawn(self, config: WorkerConfig, stderr):
        return spawn_command(["django", "qcluster"], self.env(config.dsn, config), stderr)

    def outcome_params(self) -> dict | None:
        return {"enqueued": self.enqueued, "queue": CLUSTER_NAME}

    def unfinished(self, conn, limit: int) -> list[dict]:
        rows = conn.execute(LIB_QUERIES["django_q2_unfinished"], {"queue": CLUSTER_NAME, "limit": limit}).fetchall()
        return [{"job": None, "library_id": str(job_id), "status": status, "attempts": None, "owner": ""}
                for job_id, status in rows]


ADAPTER = DjangoQ2Adapter()
