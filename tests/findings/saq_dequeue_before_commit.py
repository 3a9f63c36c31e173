"""saq 0.26.4 PostgresQueue: _dequeue() puts a job into the worker's local queue before its
transaction commits, so a job whose claim rolled back is handed out anyway, and again later.
Run: python tests/findings/saq_dequeue_before_commit.py postgresql://USER@HOST/SCRATCH_DB
A deferred constraint trigger stands in for a connection lost at COMMIT (what claimcheck's
pg_terminate_backend fault caught a saq worker doing, "idle in transaction" inside _dequeue).
"""
import asyncio
import sys

import psycopg
from saq.queue.postgres import PostgresQueue

DSN = sys.argv[1]  # a scratch database to throw away afterwards
FAIL_AT_COMMIT = """
CREATE FUNCTION fail_commit() RETURNS trigger LANGUAGE plpgsql AS
  $$ BEGIN RAISE EXCEPTION 'COMMIT failed (as when the connection drops at COMMIT)'; END $$;
CREATE CONSTRAINT TRIGGER fail_commit AFTER UPDATE ON saq_jobs DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW WHEN (NEW.status = 'active') EXECUTE FUNCTION fail_commit();"""

async def main():
    queue = PostgresQueue.from_url(DSN)
    await queue.connect()
    await queue.enqueue("task", key="job-1")
    with psycopg.connect(DSN, autocommit=True) as c:
        c.execute(FAIL_AT_COMMIT)
    first = None
    try:
        first = await queue.dequeue(timeout=2)
    except Exception as exc:
        print("dequeue raised:", type(exc).__name__, exc)
    if first is None:  # what the worker's loop does next: dequeue again
        first = await queue.dequeue(timeout=2)
    print("handed out although the claim rolled back:", first and first.key)
    with psycopg.connect(DSN, autocommit=True) as c:
        print("status in the table:", c.execute("SELECT status FROM saq_jobs WHERE key = 'job-1'").fetchone()[0])
        c.execute("DROP TRIGGER fail_commit ON saq_jobs")
    other = PostgresQueue.from_url(DSN)   # another worker
    await other.connect()
    second = await other.dequeue(timeout=2)
    print("handed out again to another worker:", second and second.key)
    await other.disconnect(); await queue.disconnect()

asyncio.run(main())
