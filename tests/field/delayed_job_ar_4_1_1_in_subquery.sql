-- expected: unsafe
-- source: collectiveidea/delayed_job_active_record v4.1.1 (commit 36f434c4fd660e8f11ce932be117e9c71dde7212): lib/delayed/backend/active_record.rb lines 47-49 (ready_to_run), 64-101 (reserve, reserve_with_scope_using_optimized_sql, the PostgreSQL branch); table from lib/generators/delayed_job/templates/migration.rb; issue #143 (https://github.com/collectiveidea/delayed_job_active_record/issues/143, on 4.1.1 with PostgreSQL 9.6, still open)
-- summary: UPDATE delayed_jobs SET locked_at, locked_by WHERE id IN (SELECT id ... ready ORDER BY priority, run_at LIMIT 1 FOR UPDATE) RETURNING *
--
-- Translation: ready_scope with no priority or queue filter (ready_to_run, by_priority;
-- max_run_time 4 hours, Delayed::Worker's default; db_time_now as now()), .limit(1).lock(true)
-- .select("id"), the worker's name as %(worker)s; the table from the migration template. The
-- completion is the destroy on success. The statement asks for LIMIT 1, so claimcheck judges it
-- against 1 whatever --batch says (pg_claimcheck.contract.limit).
-- Issue #143: "PostgreSQL is updating multiple record in some cases ... the postgresql planer
-- sometimes decides not to see the limit in the sub-query"; the maintainer: "Do you know of a
-- reliable way to reproduce this? I can't get a test case to fail." The same statement as v0.4.4's
-- (delayed_job_ar_0_4_4_update_returning.sql). Plain FOR UPDATE, no SKIP LOCKED, over-claims
-- the same way: a rescan's LockRows skips the rows this statement already updated (PostgreSQL
-- treats them as deleted) and locks the next. Measured on PostgreSQL 15
-- (tests/benchmarks/field_plans.py): analyzed at 41 jobs, a Hash Semi Join, 1 row; analyzed at 1
-- job and filled to 41, a Nested Loop Semi Join rescanning the subquery 41 times, 41 rows; 200
-- jobs with hashing, sorting and materializing off, 200 rows.

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
WHERE id IN (SELECT  id FROM "delayed_jobs"
  WHERE ((run_at <= now() AND (locked_at IS NULL OR locked_at < now() - interval '4 hours') OR locked_by = %(worker)s) AND failed_at IS NULL)
  ORDER BY priority ASC, run_at ASC LIMIT 1 FOR UPDATE)
RETURNING *;

-- name: complete
DELETE FROM "delayed_jobs" WHERE "delayed_jobs"."id" = %(id)s;
