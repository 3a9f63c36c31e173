"""pgqueuer 1.6.0 on psycopg: the worker waits for its own connection, held by its NOTIFY watcher.

`PsycopgDriver.watch_notifies` loops over `connection.notifies(timeout=1.0, stop_after=1)`, and
psycopg 3 holds the connection's lock for the whole of such a wait (`AsyncConnection.notifies`:
`async with self.lock`). The worker's dequeues and completion flushes go through that same
connection, so each waits until a notification arrives (or the 1 s timeout ends the wait). This
runs claimcheck's pgqueuer worker (the adapter's own `work`, i.e. `QueueManager.run`) on JOBS jobs,
once as is and once with the watcher replaced by an idle task (nothing else changed; with a full
queue the loop dequeues without waiting for notifications), and prints the drain time and how long
the watcher held the lock.
Run: python tests/findings/pgqueuer_psycopg_notify_lock.py postgresql://USER@HOST/SCRATCH_DB [JOBS]
"""
import asyncio
import sys
import tempfile
import time

import psycopg
from pgqueuer.adapters.drivers.psycopg import PsycopgDriver

from pg_claimcheck.libs import load_adapter
from pg_claimcheck.libs._adapter import Recorder, WorkerConfig

DSN = sys.argv[1]  # a scratch database to throw away afterwards
JOBS = int(sys.argv[2]) if len(sys.argv) > 2 else 5000
WATCHER = "notify_psycopg_watcher"  # the task name pgqueuer gives watch_notifies
held = {"s": 0.0}


class TimedLock(asyncio.Lock):
    """The connection's lock, timing how long the watcher holds it."""

    async def acquire(self):
        await super().acquire()
        task = asyncio.current_task()
        self.since = time.monotonic() if task and task.get_name() == WATCHER else None
        return True

    def release(self):
        if self.since is not None:
            held["s"] += time.monotonic() - self.since
        super().release()


async def drain(adapter, watcher: bool) -> float:
    original = PsycopgDriver.watch_notifies
    if not watcher:
        async def idle(self):
            await self.shutdown.wait()
        PsycopgDriver.watch_notifies = idle
    connect = psycopg.AsyncConnection.connect

    async def timed(*args, **kwargs):
        conn = await connect(*args, **kwargs)
        conn.lock = TimedLock()
        return conn

    tmp = tempfile.mkdtemp()
    config = WorkerConfig(library="pgqueuer", dsn=DSN, worker=0, records=f"{tmp}/w.tsv", stall_flag=f"{tmp}/stall",
                          work_ms="0", stall_s=0.0, faults=False)
    stop = asyncio.Event()

    async def until_empty():
        async with await connect(DSN, autocommit=True) as c:
            while (await (await c.execute("SELECT count(*) FROM pgqueuer")).fetchone())[0]:
                await asyncio.sleep(0.05)
        stop.set()

    held["s"] = 0.0
    psycopg.AsyncConnection.connect = timed
    try:
        started = time.monotonic()
        await asyncio.gather(adapter.work(config, Recorder(config), stop), until_empty())
        return time.monotonic() - started
    finally:
        psycopg.AsyncConnection.connect = connect
        PsycopgDriver.watch_notifies = original


def main():
    adapter = load_adapter("pgqueuer")
    adapter.install(DSN)
    for watcher in (True, False):
        with psycopg.connect(DSN, autocommit=True) as conn:
            adapter.reset(conn)
        adapter.enqueue(DSN, range(1, JOBS + 1))
        seconds = asyncio.run(drain(adapter, watcher))
        print(f"{'as is         ' if watcher else 'without watcher'}: {JOBS} jobs in {seconds:.2f} s "
              f"({JOBS / seconds:,.0f} jobs/s); the watcher held the connection's lock {held['s']:.2f} s")


main()
