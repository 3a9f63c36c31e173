"""django-tasks' recording task, in a module of its own: a Django task is made (`@task`) only in a configured
project, so only `db_worker` and the enqueuer import it (by its path, `pg_claimcheck.libs.django_tasks_job`),
never the coordinator. Django 6 has the Tasks framework built in (`django.tasks`); before it, the
`django-tasks` backport provides it (django-tasks-db's `compat`)."""
import asyncio

try:
    from django.tasks import TaskContext, task
except ImportError:  # Django < 6: the backport
    from django_tasks import TaskContext, task

from pg_claimcheck.libs._adapter import command_recorder

QUEUE_NAME = "claimcheck"


@task(takes_context=True, queue_name=QUEUE_NAME)
def claimcheck_record(context: TaskContext, n: int) -> bool:
    result = context.task_result
    started = result.started_at.timestamp() if result.started_at else None  # set by its claim
    asyncio.run(command_recorder().execute(n, result.id, context.attempt, started))  # db_worker runs tasks synchronously
    return True
