"""sidequest on its PostgreSQL backend under the ledger: its own Node engine (pg_claimcheck/libs/node/sidequest.mjs,
the job class in sidequest-job.mjs), installed with npm into the cache on first use with its PostgreSQL driver,
`@sidequest/postgres-backend`, as its README installs them ("npm install sidequest", then "npm install
@sidequest/postgres-backend", "PostgreSQL (recommended)"), on Node 22 (pg_claimcheck.libs.external).

Pinned to sidequest 1.16.4 and its driver of the same version; sidequest's `"engines"` want Node >= 22.6.0, so
on a machine whose node is older the run brings Node 22 from npm (pg_claimcheck.libs.npm).

What it promises, in its own words (packages/docs/introduction/how-it-works.md, "How jobs are claimed"): "SQL
backends use `SELECT ... FOR UPDATE SKIP LOCKED` ... Multiple engine instances can poll the same database
without double-issuing a job"; of a job left behind ("Job lifecycle"): "Stale jobs stuck in `running` or
`claimed` past a configurable age are automatically reset to `pending` by a background routine"; and
(packages/docs/production/graceful-shutdown.md, "Stale Job Recovery"): "If a job is still running after the
configured timeout, it will be marked as stale and retried automatically". The routine
(`releaseStaleJobs`, @sidequest/engine dist/routines/release-stale-jobs.js) retries a `running` job whose
`attempted_at` is older than `releaseStaleJobsMaxStaleMs` (10 minutes by default) and puts back a `claimed` one
older than `releaseStaleJobsMaxClaimedMs` (1 minute); it runs on a cron every `releaseStaleJobsIntervalMin`
whole minutes (60 by default) and once when an engine starts. There is no heartbeat: the age runs from the start.

So the ledger judges sidequest at-least-once with redelivery after that age: a job of an engine that died, or
of a job that ran (here: stalled) past the age, may run again; any other second execution is a double
execution, and a job never run is lost.

Deployed as its docs deploy it: N worker processes, each one `Sidequest.start` with the PostgreSQL backend and
its defaults (it forks an engine process, which claims with a poll every 100 ms and runs each job in a piscina
worker thread; queue concurrency 10), the dashboard off (N processes would share its port). Under `--faults`
the stale ages are FAULTS_STALE_MS and the routine runs every minute, its shortest interval: a fault run waits
up to a minute more for it (`recovery_s`). FAULTS_STALE_MS is 30 s, not the 2 s of the other adapters' leases:
the engine starts a job in a piscina thread, which here took up to 21 s at load 28 (a fresh thread imports
sidequest whole), and with a 2 s age such a job, claimed and `running` but not yet started, was retried beside
itself by a live engine (docs/node-libraries.md). At sidequest's default age (10 minutes) that start-up cannot
reach it, so the fault runs take an age above it rather than report the harness's load as the library's defect.

`--pgbench` is not written: its claim is knex's query builder in a transaction (`SqlBackend.claimPendingJob`),
built at run time, and its completion goes through `JobTransitioner`; not lifted yet.
"""
from __future__ import annotations

from pg_claimcheck.libs.external import ExternalAdapter

FAULTS_STALE_MS = 30_000
ENQUEUE_CONCURRENCY = 25
"""Enqueues in flight at once in the seeding step (sidequest.mjs `enqueue`)."""
MAX_ATTEMPTS = 5
"""Attempts per job (sidequest's default, JOB_BUILDER_FALLBACK.maxAttempts, is 5 too): set, so the run does not
depend on a default moving."""


class SidequestAdapter(ExternalAdapter):
    name = "sidequest"
    package = "sidequest"
    pinned = "1.16.4"
    peers = ("@sidequest/postgres-backend@1.16.4",)
    script = "sidequest.mjs"
    runtime_floor = 22
    promise = ("claimed with FOR UPDATE SKIP LOCKED, \"without double-issuing a job\"; a job still running after "
               "its stale age is \"marked as stale and retried automatically\" (no heartbeat): at-least-once")
    docs = ("https://github.com/sidequestjs/sidequest/blob/master/packages/docs/introduction/how-it-works.md; "
            "packages/docs/production/graceful-shutdown.md (Stale Job Recovery)")
    delivery = "at-least-once"
    lease_s = FAULTS_STALE_MS / 1000
    stall_release_s = FAULTS_STALE_MS / 1000 * 0.9  # the age runs from attempted_at, set just before the job starts
    claim_lease_s = FAULTS_STALE_MS / 1000 * 0.9
    recovery_s = 60.0  # the routine's cron: every minute at the most
    completion_lag_s = 0.3
    """The completed transition's round trip from the engine process, after the thread returned."""

    def options(self) -> dict:
        return {**super().options(), "max_attempts": MAX_ATTEMPTS, "faults_stale_ms": FAULTS_STALE_MS,
                "enqueue_concurrency": ENQUEUE_CONCURRENCY}


ADAPTER = SidequestAdapter()
