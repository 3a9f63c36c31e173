"""taskiq 0.13.0 with taskiq-postgres 0.9.1 (PsycopgBroker): a task kicked while no worker listens is never run.
`kick` inserts the message (status `pending`) and sends `NOTIFY taskiq, '<id>'`; a worker claims only the ids it is
notified of (`listen`), and nothing reads the table otherwise, so the message stays `pending` after workers start.
A task kicked once a worker listens runs. (A worker killed while it runs a task leaves it `processing` the same way.)
Run: python tests/findings/taskiq_postgres_kicked_before_a_worker_listens.py postgresql://USER@HOST/SCRATCH_DB
"""
import asyncio
import os
import subprocess
import sys
import time

from taskiq_pg.psycopg import PsycopgBroker

DSN = sys.argv[1] if len(sys.argv) > 1 else os.environ["FINDING_DSN"]  # a scratch database to throw away
broker = PsycopgBroker(dsn=lambda: os.environ["FINDING_DSN"], table_name="finding_messages", channel_name="finding")


@broker.task(task_name="touch")
async def touch(n: int) -> None:
    print(f"ran task {n}", flush=True)


async def kick(n: int) -> None:
    via = PsycopgBroker(dsn=DSN, table_name="finding_messages", channel_name="finding")
    await via.startup()
    await touch.kicker().with_broker(via).kiq(n)
    await via.shutdown()


def statuses() -> str:
    import psycopg

    with psycopg.connect(DSN) as conn:
        return str(conn.execute("SELECT message::json->'args', status FROM finding_messages ORDER BY id").fetchall())


if __name__ == "__main__":
    asyncio.run(kick(1))  # before any worker listens
    env = dict(os.environ, FINDING_DSN=DSN, PYTHONPATH=os.path.dirname(os.path.abspath(__file__)))
    worker = subprocess.Popen([sys.executable, "-m", "taskiq", "worker", "taskiq_postgres_kicked_before_a_worker_listens:broker",
                               "--workers", "1"], env=env)
    time.sleep(10)  # the worker is up and listening
    asyncio.run(kick(2))  # while it listens
    time.sleep(5)
    print("messages left (args, status):", statuses())  # task 1 still pending; task 2 ran and was deleted
    worker.terminate()
    worker.wait()
