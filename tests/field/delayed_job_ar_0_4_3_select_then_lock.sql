-- expected: unsafe
-- source: collectiveidea/delayed_job_active_record v0.4.3 (commit 387bb6a434a490b74d63a14559e104875e545c14): lib/delayed/backend/active_record.rb (self.reserve, ready_to_run); issue #40 "Locking no longer functions correctly" (2013-03-04), fixed by PR #46 (e2112c1579140606e410a9125de2dd5821553fb6, v0.4.4); table from lib/generators/delayed_job/templates/migration.rb
-- summary: historical double execution: a plain SELECT of the first ready job, then with_lock (re-SELECT by id FOR UPDATE, which does not re-check locked_at) and a save of locked_at/locked_by; two workers reading the same row both lock it in turn and both run it
--
-- Translation: `pick` is nextScope.first (ready_to_run, by_priority, limit 1; max_run_time the
-- default 4 hours; db_time_now as now()); the claim is with_lock's `lock!` (SELECT ... FOR UPDATE
-- by id) and the save (UPDATE of locked_at, locked_by), in one transaction as with_lock opens
-- it; the UPDATE returns the id (the job the worker goes on to run). Completion is delayed_job's
-- destroy on success.

-- name: schema
CREATE TABLE delayed_jobs (
  id bigserial PRIMARY KEY,
  priority integer DEFAULT 0 NOT NULL,
  attempts integer DEFAULT 0 NOT NULL,
  handler text NOT NULL,
  last_error text,
  run_at timestamp,
  locked_at timestamp,
  failed_at timestamp,
  locked_by varchar,
  queue varchar,
  created_at timestamp,
  updated_at timestamp
);
CREATE INDEX delayed_jobs_priority ON delayed_jobs (priority, run_at);

-- name: seed
INSERT INTO delayed_jobs (handler, run_at, created_at, updated_at)
SELECT '--- !ruby/object:ClaimcheckJob {}', now() - interval '1 second', now(), now() FROM generate_series(1, %(jobs)s)
RETURNING id;

-- name: remaining
SELECT count(*) FROM delayed_jobs;

-- name: pick
SELECT "delayed_jobs".* FROM "delayed_jobs"
WHERE ((run_at <= now() AND (locked_at IS NULL OR locked_at < now() - interval '4 hours') OR locked_by = %(worker)s) AND failed_at IS NULL)
ORDER BY priority ASC, run_at ASC
LIMIT 1;

-- name: claim
SELECT "delayed_jobs".* FROM "delayed_jobs" WHERE "delayed_jobs"."id" = ANY(%(id)s::bigint[]) LIMIT 1 FOR UPDATE;
UPDATE "delayed_jobs" SET "locked_at" = now(), "locked_by" = %(worker)s, "updated_at" = now()
WHERE "delayed_jobs"."id" = ANY(%(id)s::bigint[])
RETURNING id;

-- name: complete
DELETE FROM "delayed_jobs" WHERE "delayed_jobs"."id" = %(id)s;
