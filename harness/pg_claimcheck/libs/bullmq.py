"""BullMQ on its PostgreSQL backend under the ledger: its own Node worker
(pg_claimcheck/libs/node/bullmq.mjs), installed with npm into the cache on first use, with `pg`, the
optional peer dependency its PostgreSQL backend loads (docs/gitbook/guide/postgresql.md: "npm
install pg"), as its users install it (pg_claimcheck.libs.external).

Pinned to bullmq 6.7.0 (`"engines": {"node": ">=14.18.0"}`: it runs on the machine's Node 20), the
newest 6.x npm served when this was written; 6.x is the first major with the PostgreSQL backend
(`createPostgresBackend`), which runs "the exact same Queue / Worker ... API on PostgreSQL instead
of Redis" (guide/postgresql.md). Its schema is made by `runMigrations`, which the guide says to run
"explicitly from one deployment step": the adapter's `install`.

What it promises, in its own words (docs/gitbook/guide/jobs/stalled.md, "Stalled"): a job being
processed keeps its lock by renewing it; "When a worker is not able to notify the queue that it is
still working on a given job, that job is moved back to the waiting list, or to the failed set";
"If a job stalls more than a predefined limit (see the maxStalledCount option), the job will be
failed permanently with the error 'job stalled more than allowable limit'. The default is 1"; and
Worker's `lockDuration` (src/interfaces/worker-options.ts): "If the lock is lost, the job will be
eventually be picked up by the stalled checker and move back to wait so that another worker can
process it again". The PostgreSQL claim is `move_to_active` (`FOR UPDATE SKIP LOCKED`, 0001_schema.sql:
"claiming uses FOR UPDATE SKIP LOCKED so concurrent workers never block each other").

So the ledger judges BullMQ at-least-once with redelivery after its lock: a job of a worker that
died, or blocked its event loop past `lockDuration`, may run again (a redelivery) or end failed
after `maxStalledCount` stalls (allowed: documented, and the run counts it failed, not lost); any
other second execution is a double execution, and a job never run nor failed is lost.

Deployed as its docs deploy it: N worker processes, each one `Worker` with BullMQ's defaults
(concurrency 1, maxStalledCount 1, lockDuration 30 s, stalledInterval 30 s). Under `--faults` the
lock is FAULTS_LOCK_MS and the stalled check runs every FAULTS_STALLED_MS, so a short run sees a
stalled job come back. `--pgbench` is not written: its claim is a PL/pgSQL function
(`move_to_active`) fed by client state (token, the worker's clock), not lifted yet.
"""
from __future__ import annotations

from pg_claimcheck.libs.external import ExternalAdapter

LOCK_MS = 30_000
"""BullMQ's default lockDuration (and stalledInterval)."""
FAULTS_LOCK_MS = 2_000
FAULTS_STALLED_MS = 1_000


class BullMQAdapter(ExternalAdapter):
    name = "bullmq"
    package = "bullmq"
    pinned = "6.7.0"
    peers = ("pg@8.23.1",)
    script = "bullmq.mjs"
    promise = ("a job whose worker stops renewing its lock (lockDuration) is moved back to wait and run again, "
               "or failed after maxStalledCount (1) stalls; claim by move_to_active, FOR UPDATE SKIP LOCKED")
    docs = ("https://github.com/taskforcesh/bullmq/blob/master/docs/gitbook/guide/jobs/stalled.md; "
            "docs/gitbook/guide/postgresql.md")
    lease_s = FAULTS_LOCK_MS / 1000
    # renewed every lockDuration / 2: a lock can run out half a lease after the stall began
    stall_release_s = FAULTS_LOCK_MS / 2000

    def options(self) -> dict:
        return {**super().options(), "attempts": 1, "concurrency": 1, "lock_ms": LOCK_MS, "faults_lock_ms": FAULTS_LOCK_MS,
                "faults_stalled_ms": FAULTS_STALLED_MS, "max_stalled": 1, "drain_delay_s": 5}


ADAPTER = BullMQAdapter()
