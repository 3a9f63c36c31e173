-- expected: unsafe
-- source: collectiveidea/delayed_job_active_record v0.4.4 (commit 221936296d6852198cf3bc5ffbcd78ec9a9d965a; PR #46 "Fix job locking", merged as e2112c1579140606e410a9125de2dd5821553fb6): lib/delayed/backend/active_record.rb (self.reserve, the PostgreSQL branch); table from lib/generators/delayed_job/templates/migration.rb
-- summary: the fix of issue #40: one statement, UPDATE ... SET locked_at, locked_by WHERE id IN (ready scope LIMIT 1 FOR UPDATE) RETURNING *; a waiter re-checks the ready condition on the locked row (READ COMMITTED) and gets nothing rather than the same job
--
-- Expected unsafe since issue 22: the fix of issue #40 holds against the race it fixed (two
-- workers locking the same job), but the statement is the one issue #143 reports on 4.1.1
-- (delayed_job_ar_4_1_1_in_subquery.sql): under a plan that rescans the IN subquery (a small
-- queue analyzed while it held one job), it locked and returned every ready job, 41 rows for
-- LIMIT 1 on PostgreSQL 15 (tests/benchmarks/field_plans.py). A plain `check` on fresh
-- statistics gets the safe plan (a Hash Semi Join).
--
-- Translation: ready_scope as in v0.4.3's file (ready_to_run, by_priority; max_run_time 4 hours;
-- db_time_now as now()) with .limit(1).lock(true).select('id'). Completion is the destroy on success.

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

-- name: claim
UPDATE "delayed_jobs" SET locked_at = now(), locked_by = %(worker)s
WHERE id IN (
  SELECT id FROM "delayed_jobs"
  WHERE ((run_at <= now() AND (locked_at IS NULL OR locked_at < now() - interval '4 hours') OR locked_by = %(worker)s) AND failed_at IS NULL)
  ORDER BY priority ASC, run_at ASC
  LIMIT 1 FOR UPDATE)
RETURNING *;

-- name: complete
DELETE FROM "delayed_jobs" WHERE "delayed_jobs"."id" = %(id)s;
