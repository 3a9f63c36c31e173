-- expected: safe
-- source: collectiveidea/delayed_job_active_record PR #177 (https://github.com/collectiveidea/delayed_job_active_record/pull/177, open; jpcuevaslavin/delayed_job_active_record commit 88e70bff4d7aac9d529df1f078d4f6b6ede638ad "psql :optimized_sql strategy now updates a single row"): lib/delayed/backend/active_record.rb lines 55-62 (ready_to_run), 125-137 (reserve_with_scope_using_optimized_postgres)
-- summary: WITH pending AS (SELECT id ... ready ORDER BY priority, run_at LIMIT 1 FOR UPDATE) UPDATE delayed_jobs SET locked_at, locked_by FROM pending WHERE delayed_jobs.id = pending.id RETURNING *
--
-- Translation: ready_scope with no priority or queue filter (ready_to_run, by_priority;
-- max_run_time 4 hours, Delayed::Worker's default; db_time_now as now()), .limit(1).lock(true)
-- .select("id"), the worker's name as %(worker)s; the table from the migration template. The
-- completion is the destroy on success. The statement asks for LIMIT 1, so claimcheck judges it
-- against 1 whatever --batch says (pg_claimcheck.contract.limit).
-- The PR: "the planner may choose to generate a plan that executes a nested loop over the
-- LIMITing subquery, causing more UPDATEs than LIMIT. The solution is to materialize the selection
-- in a CTE." A CTE whose query locks rows (FOR UPDATE) is never inlined into the outer query
-- (PostgreSQL 12+ inlines only side-effect-free CTEs), so it runs once, whatever the plan: a
-- CTE Scan on pending, 1 row, under every plan tests/benchmarks/field_plans.py tried, the
-- Nested Loop that made 4.1.1's statement take 41 rows included.

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
WITH pending AS (SELECT  id FROM "delayed_jobs"
  WHERE (((run_at <= now() AND (locked_at IS NULL OR locked_at < now() - interval '4 hours')) OR locked_by = %(worker)s) AND failed_at IS NULL)
  ORDER BY priority ASC, run_at ASC LIMIT 1 FOR UPDATE)
UPDATE "delayed_jobs" SET locked_at = now(), locked_by = %(worker)s FROM pending WHERE "delayed_jobs".id = pending.id RETURNING *;

-- name: complete
DELETE FROM "delayed_jobs" WHERE "delayed_jobs"."id" = %(id)s;
