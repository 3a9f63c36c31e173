"""graphile-worker under the ledger: its own Node worker (pg_claimcheck/libs/node/graphile-worker.mjs),
installed with npm into the cache on first use (pg_claimcheck.libs.external).

Pinned to graphile-worker 0.17.3, the last before 0.18 (whose `"engines"` want Node >= 22.18);
0.17.3 declares Node >= 14.

What it promises, in its own words (website/docs/index.md, https://worker.graphile.org/docs):
"each job will execute at least once. Most jobs will execute exactly once". A job is taken by
`get_job` with `FOR UPDATE SKIP LOCKED` and locked to its worker (`locked_by`, `locked_at`); it
is given to another worker only once `locked_at` is 4 hours old (`job_expiry interval '4 hours'`
in get_job, dist/sql/resetLockedAt.js), or when the user calls `forceUnlockWorkers` for workers
"no longer running (crashed, were terminated, are permanently unreachable, etc)"
(dist/interfaces.d.ts, WorkerUtils.forceUnlockWorkers). A worker that stops gracefully unlocks
its job itself.

So the ledger judges graphile-worker at-least-once with one allowance: a job of a worker whose
process died may run again once forceUnlockWorkers released it; the coordinator runs exactly
that call (:meth:`GraphileWorkerAdapter.recover`) for the workers it saw die, as a supervisor
that knows would. No run is long enough for the 4-hour lock to expire: a stall (a blocked event
loop, STALL_S) is well inside the lock, so any other execution of its job meanwhile is a double
execution, and a terminated connection or a restart must not give a job to a second worker either.

Each worker process runs `run()` with concurrency 1 (graphile-worker's default). Jobs are locked by
the worker pool's id (`pool-<random hex>`, dist/main.js), which each process says in its hello:
that is what forceUnlockWorkers takes.

The pgbench cycle (`--pgbench`) is one job of that worker: `batchGetJobs` (batch 1, one statement
locking the job and its queue's row) and, once the task returned, `batchCompleteJobs` (a delete of
the job), as the installed graphile-worker builds them (graphile-worker.mjs `sql` calls dist/sql/*.js
through a recording client), with what `run` sends: the pool's id (one per pgbench client) and the
ids of the tasks it knows (ours, looked up in graphile_worker._private_tasks). Left out: the
LISTEN connection's notifications and what runs on timers (the cron, the periodic lock reset).
"""
from __future__ import annotations

from pathlib import Path

import psycopg

from pg_claimcheck.contract.dialect import substitute_numbered
from pg_claimcheck.libs import external
from pg_claimcheck.libs._adapter import LibraryCycle, fetch_then_complete
from pg_claimcheck.libs._sql import LIB_QUERIES
from pg_claimcheck.libs.external import DeletesFinished

MAX_ATTEMPTS = 25
"""graphile-worker's default."""
LOCK_S = 4 * 3600.0
"""get_job's `job_expiry`: a locked job is given to another worker only after it."""
STALL_S = 1.0
"""The base of a stall under --faults (it lasts FaultPlan.stall_factor of it): the lock is 4 hours."""
POLL_MS = 500
"""Between polls when the queue looked empty (graphile-worker's default 2000; LISTEN/NOTIFY wakes it
for new jobs, and it fetches again at once after a job)."""


class GraphileWorkerAdapter(DeletesFinished):
    name = "graphile-worker"
    package = "graphile-worker"
    pinned = "0.17.3"
    script = "graphile-worker.mjs"
    suspendable = ("pollInterval: 900000 (default 2000 ms: graphile-worker dist/config.js); new jobs still wake it "
                   "by LISTEN \"jobs:insert\"")
    promise = ("\"each job will execute at least once. Most jobs will execute exactly once\" (get_job with FOR "
               "UPDATE SKIP LOCKED, locked for 4 hours); a crashed worker's job runs again after forceUnlockWorkers")
    docs = "https://github.com/graphile/worker/blob/v0.17.3/website/docs/index.md"
    lease_s = STALL_S
    stall_release_s = LOCK_S

    def options(self) -> dict:
        return {**super().options(), "max_attempts": MAX_ATTEMPTS, "poll_ms": POLL_MS}

    def recover(self, dsn: str, dead: dict[int, Path]) -> list[int]:
        """WorkerUtils.forceUnlockWorkers (its own SQL) for the worker pools of the processes that died,
        as each said in its hello."""
        workers = sorted({h["library_worker"] for path in dead.values()
                          if (h := external.hello(path)) and h.get("library_worker")})
        if not workers:
            return []
        with psycopg.connect(dsn, autocommit=True) as conn:
            keys = [k for (k,) in conn.execute(LIB_QUERIES["graphile_worker_locked_by"], {"workers": workers})]
            if keys:
                conn.execute(LIB_QUERIES["graphile_worker_force_unlock"], {"workers": workers})
        return keys

    def pgbench_cycle(self, work_us: int) -> LibraryCycle:
        said = self.library_sql()
        pool = "('pool-pgbench-' || :client_id)"
        tasks = f"(SELECT array_agg(id) FROM graphile_worker._private_tasks WHERE identifier = '{said['task']}')"
        # `returning *` of an UPDATE ... FROM j returns j's columns too: two columns named id (equal)
        return fetch_then_complete(
            substitute_numbered(said["get_job"], {1: pool, 2: tasks}.__getitem__),
            "SELECT count(*) AS cc_n, coalesce(max((to_jsonb(cc_rows) ->> 'id')::bigint), 0) AS cc_id FROM cc_rows",
            substitute_numbered(said["complete_job"], {1: "CAST(:cc_id AS bigint)"}.__getitem__), work_us, 1,
            f"graphile-worker {self.pinned} batchGetJobs (batch 1) and batchCompleteJobs (dist/sql), as the installed "
            "graphile-worker builds them")


ADAPTER = GraphileWorkerAdapter()
