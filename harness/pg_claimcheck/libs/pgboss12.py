"""pg-boss 12 under the ledger, beside pg-boss 10 (pg_claimcheck.libs.pgboss): the same worker script
(pg_claimcheck/libs/node/pg-boss.mjs speaks both) and the same reads of `pgboss.job`, on Node 22.

Pinned to pg-boss 12.38.0, whose `"engines"` want Node >= 22.12: on a machine whose node is older,
the run brings Node 22 from npm (pg_claimcheck.libs.npm). Its promise is worded as in 10 (README.md and
docs/introduction.md at 12.38.0: "Exactly-once job delivery"; `expireInSeconds`, "How many seconds
a job may be in active state before being retried or failed", src/types.ts QueueOptions), so it is
judged by the same rule as pg-boss 10 (pg_claimcheck.libs.pgboss). What changed for a handler that
outlives its expiry: 12's `Manager.work` fails the batch when the expiry passes, aborts each job's
`signal`, and "this worker fetches nothing until it returns" (its overrun warning, dist/manager.js),
where 10 fetched again at once; `claimcheck lib pg-boss-12 --work-ms 3000` shows what the ledger
sees of it.

`--pgbench` runs 12's own statements as the installed pg-boss builds them (dist/plans.js at 12.38.0, through
pg-boss.mjs's `sql`): `plans.fetchNextJob` with the options `Manager.#fetch` gives it for our queue (its table
`job_common`, a queue made without `partition`; policy `standard`; batchSize 20; includeMetadata), and the
worker's completion, `Manager.complete` with the fetched jobs: `plans.completeJobs(schema, table, undefined,
true)`, fenced to each job's fetched `retry_count`.
"""
from __future__ import annotations

from pg_claimcheck.libs.pgboss import PgBossAdapter


class PgBoss12Adapter(PgBossAdapter):
    name = "pg-boss-12"
    pinned = "12.38.0"
    runtime_floor = 22
    docs = "https://github.com/timgit/pg-boss/blob/12.38.0/docs/introduction.md; src/types.ts (expireInSeconds)"

    @property
    def sql_name(self) -> str:  # the same tables as pg-boss 10: sql/libs.sql's pg_boss_* reads
        return "pg_boss"


ADAPTER = PgBoss12Adapter()
