"""django-tasks with its database backend under the ledger (`pip install 'pg-claimcheck[django-tasks]'`):
Django's Tasks framework (`django.tasks` in Django 6, the `django-tasks` backport before it) with the ORM
backend of `django-tasks-db`, where the database backend lives since django-tasks 0.12.

Why: it is Django's own API for background work, and its database backend (by the framework's author) is
what a Django user with no broker reaches for first.

What it promises, from Django's docs (https://docs.djangoproject.com/en/6.0/topics/tasks/, "Background Task
fundamentals"): "When a new Task is added, a Worker claims the Task, executes it, and saves the status and
result back to the Queue Store." django-tasks-db's worker (`django_tasks_db/management/commands/db_worker.py`,
`Worker.run`) claims in one transaction, `SELECT ... FOR UPDATE SKIP LOCKED` of the oldest READY row and
its update to RUNNING with the worker's id ("claim the task, so it isn't run by another worker process"),
then runs it and saves SUCCESSFUL or FAILED. Nothing gives a RUNNING task back: no lease, no heartbeat, no
retry (the framework has none). So delivery is at-most-once: one execution per task, and a task whose
worker died mid-task stays RUNNING and is never run.

Everything goes through its public API and its commands, as its README deploys it: `manage.py migrate`
creates the table, `Task.enqueue` enqueues (one INSERT each, autocommitted), and each worker process is
`manage.py db_worker --queue-name claimcheck` with its defaults (a 1 s poll when the queue is empty, a
random start-up delay under 1 s, a random 32-character worker id), in the run's own project
(pg_claimcheck.libs._django). SIGTERM is db_worker's graceful stop: the task in hand finishes.
"""
from __future__ import annotations

import contextlib

import django_tasks_db  # noqa: F401  (the library: missing, the adapter says which extra installs it)

from pg_claimcheck.libs import _django
from pg_claimcheck.libs._adapter import CommandWorker, NoLease, WorkerConfig, spawn_command

QUEUE_NAME = "claimcheck"
BACKEND = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": [QUEUE_NAME]}}


def _apps() -> list[str]:
    try:
        import django.tasks  # noqa: F401  (Django 6: the framework is Django's own)

        return ["django_tasks_db"]
    except ImportError:
        return ["django_tasks", "django_tasks_db"]  # the backport is an app of its own


class DjangoTasksAdapter(CommandWorker, NoLease):
    name = "django-tasks"
    distribution = "django-tasks-db"
    promise = ("a worker claims a task (SELECT ... FOR UPDATE SKIP LOCKED, set RUNNING), executes it and saves its "
               "status; nothing gives a RUNNING task of a dead worker back, no retry: at-most-once")
    docs = ("https://docs.djangoproject.com/en/6.0/topics/tasks/ (Background Task fundamentals); "
            "django_tasks_db/management/commands/db_worker.py (Worker.run)")
    delivery = "at-most-once"

    def env(self, dsn: str, worker: WorkerConfig | None = None) -> dict[str, str]:
        return _django.environment(dsn, _apps(), {"TASKS": BACKEND}, worker)

    def install(self, dsn: str) -> None:
        _django.manage(self.env(dsn), "migrate", "--noinput", "--verbosity", "0")

    def enqueue(self, dsn: str, keys: range) -> list:
        return _django.enqueue_command(self.env(dsn), self.name, keys)

    def enqueue_here(self, keys: range) -> list[str]:
        """In the run's project (pg_claimcheck.libs._django.main): one `Task.enqueue` per key."""
        from pg_claimcheck.libs.django_tasks_job import claimcheck_record

        return [claimcheck_record.enqueue(n=k).id for k in keys]

    feeds = True

    @contextlib.asynccontextmanager
    async def feeder(self, dsn: str):
        _django.setup_here(self.env(dsn))  # the producer: a process forked for this run
        from asgiref.sync import sync_to_async
        from django.db import connections

        from pg_claimcheck.libs.django_tasks_job import claimcheck_record

        try:
            async def defer(key: int) -> str:
                return (await claimcheck_record.aenqueue(n=key)).id

            yield defer
        finally:
            await sync_to_async(connections.close_all)()  # the thread aenqueue's queries ran in

    def spawn(self, config: WorkerConfig, stderr):
        return spawn_command(["django", "db_worker", "--queue-name", QUEUE_NAME], self.env(config.dsn, config), stderr)


ADAPTER = DjangoTasksAdapter()
