"""pg-boss under the ledger: its own Node worker (pg_claimcheck/libs/node/pg-boss.mjs), installed
with npm into the cache on first use (pg_claimcheck.libs.external).

Pinned to pg-boss 10.4.2, the last 10.x (`"engines": {"node": ">=20"}`; 11.x wants Node 22).

What it promises, in its own words (docs/introduction.md, and the package's README.md at 10.4.2):
"pg-boss relies on SKIP LOCKED ... This provides exactly-once delivery and the safety of
guaranteed atomic commits to asynchronous job processing", and among its features "Exactly-once
job delivery". Beside it, its queue options (docs/api/queues.md): `expireInSeconds`, "How many
seconds a job may be in active state before being retried or failed" (maintenance runs
`failJobsByTimeout`, src/plans.js: `state = 'active' AND (started_on + expire_in) < now()`, which
deletes and re-inserts the job as `retry` while `retry_count < retry_limit`), and the worker
itself races each handler against the same expiry (`resolveWithinSeconds` in `Manager.work`,
src/manager.js): when the timer wins it fails the job, to be retried, and fetches again. Nothing
stops the handler that is still running (pg-boss #238, #102; #529, a job re-run after 15 minutes
despite `expireInHours: 6`).

So the ledger judges pg-boss by "exactly-once delivery" with one allowance, its documented expiry
of a worker that failed: a job may run again once its worker died, or blocked its event loop, for
longer than `expireInSeconds` (a stall past the expiry is a redelivery). A handler that is alive
and merely slower than `expireInSeconds`, run again beside its own retry, is a double execution:
`claimcheck lib pg-boss --work-ms 3000` shows it. The jobs are enqueued with EXPIRE_S, and the
workers run maintenance every MAINTENANCE_S, in every run (as saq's jobs get a short heartbeat), so
a short run sees the expiry; a job that takes far less is not touched by it.

The worker loop is `PgBoss.work` with `batchSize` BATCH_SIZE and the shortest polling interval
pg-boss allows (0.5 s: its loop waits out the interval after every fetch, found jobs or not, so
a batch of one would cap a worker at two jobs a second); the batch's jobs run concurrently.

The pgbench cycle (`--pgbench`) is one turn of that loop: `fetchNextJob` (one statement, the batch)
and, once the handler returned, `completeJobs` for the batch's ids (one statement), both as the
installed pg-boss builds them (src/plans.js, asked through pg-boss.mjs `sql`), with the values
`work` sends: the queue's name, `batchSize`, and a null output (pg-boss completes a batch of more
than one job without the handler's result). Left out: the loop's wait for the rest of its
polling interval (no SQL), and what runs on timers (maintenance, the queue-state monitor).
"""
from __future__ import annotations

from pg_claimcheck.contract.dialect import substitute_numbered
from pg_claimcheck.libs._adapter import LibraryCycle, fetch_then_complete
from pg_claimcheck.libs.external import ExternalAdapter

RETRY_LIMIT = 5
"""Retries per job (pg-boss's default is 2): a crash must not turn into a lost job in a short run."""
EXPIRE_S = 2
"""Each job's `expireInSeconds` (whole seconds, at least 1 in pg-boss; its default is 15 minutes)."""
MAINTENANCE_S = 1
"""`maintenanceIntervalSeconds` (pg-boss's default is 120), so an expired job is retried within
about a second of its expiry."""
BATCH_SIZE = 20
POLLING_S = 0.5
QUEUE = "claimcheck"
"""The queue our jobs go to (pg-boss.mjs)."""


class PgBossAdapter(ExternalAdapter):
    name = "pg-boss"
    package = "pg-boss"
    pinned = "10.4.2"
    script = "pg-boss.mjs"
    runtime_floor = 20
    suspendable = ("new PgBoss({supervise: false, schedule: false}) and work(..., {pollingIntervalSeconds: 900}) "
                   "(defaults: maintenance every 120 s, the cron monitor at most every 45 s, a poll every 2 s: "
                   "pg-boss src/attorney.js); it has no LISTEN, so a job waits up to the poll")
    promise = ("\"exactly-once delivery\" (fetch with FOR UPDATE SKIP LOCKED); a job active past expireInSeconds "
               "is retried by maintenance: a worker that died or blocked past the expiry may see its job again, "
               "a live handler must not run beside its own retry")
    docs = "https://github.com/timgit/pg-boss/blob/10.4.2/docs/introduction.md; docs/api/queues.md (expireInSeconds)"
    lease_s = float(EXPIRE_S)
    # started_on is the claim; a stall begins right after the start, and maintenance runs each second
    stall_release_s = EXPIRE_S * 0.9
    completion_lag_s = 0.2
    """The batch is completed in one statement once all its jobs returned."""

    def options(self) -> dict:
        return {**super().options(), "retry_limit": RETRY_LIMIT, "expire_s": EXPIRE_S, "maintenance_s": MAINTENANCE_S,
                "batch_size": BATCH_SIZE, "polling_s": POLLING_S}

    def pgbench_cycle(self, work_us: int) -> LibraryCycle:
        said = self.library_sql()
        queue = "'" + QUEUE + "'"
        # 11+ completes the worker's batch fenced to the attempts it fetched ($4: 'id:retry_count' pairs)
        fenced = "$4" in said["complete"]
        pairs = ", coalesce(array_agg(id::text || ':' || \"retryCount\"), '{}') AS cc_pairs" if fenced else ""
        return fetch_then_complete(
            substitute_numbered(said["fetch"], {1: queue, 2: str(BATCH_SIZE)}.__getitem__),
            f"SELECT count(*) AS cc_n, coalesce(array_agg(id), '{{}}') AS cc_ids{pairs} FROM cc_rows",
            substitute_numbered(said["complete"], {1: queue, 2: "CAST(:cc_ids AS uuid[])", 3: "NULL",
                                                   4: "CAST(:cc_pairs AS text[])"}.__getitem__),
            work_us, BATCH_SIZE, f"{self.name} {self.pinned} plans.fetchNextJob (batchSize {BATCH_SIZE}, includeMetadata) "
                                 f"and plans.completeJobs{' (fenced to the fetched attempts)' if fenced else ''}, as the "
                                 "installed pg-boss builds them")


ADAPTER = PgBossAdapter()
