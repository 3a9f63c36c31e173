-- expected: safe
-- source: bensheldon/good_job v3.99.1 (commit fc3add15e7cf8c051732082261bdc501dd8ebce1): README.md lines 1215-1231 (the executable-jobs query), app/models/concerns/good_job/advisory_lockable.rb lines 41-62 and 166-183 (advisory_lock scope, unlock in ensure), app/models/good_job/base_execution.rb lines 365-383 and 639-643 (perform_with_advisory_lock, executable?); table from lib/generators/good_job/templates/install/migrations/create_good_jobs.rb.erb
-- summary: uuid keys; session pg_try_advisory_lock on md5('good_jobs-' || active_job_id) over a MATERIALIZED CTE, re-check of finished_at after locking, finished_at set on success, unlock after commit
--
-- Translation: the columns the claim, the re-check and the completion touch, with the
-- generator's types (uuid id default gen_random_uuid(), active_job_id uuid) and its candidate
-- index. `pick` is the advisory_lock scope with limit(1) (no queue_select_limit); `claim` is
-- executable? (reload, finished_at blank); `complete` is perform's finished_at update (job records
-- preserved, v3's default); `after_commit` is advisory_unlock with the same key expression.

-- name: schema
CREATE TABLE good_jobs (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  queue_name text,
  priority integer,
  serialized_params jsonb,
  scheduled_at timestamp(6),
  performed_at timestamp(6),
  finished_at timestamp(6),
  error text,
  created_at timestamp(6) NOT NULL,
  updated_at timestamp(6) NOT NULL,
  active_job_id uuid,
  concurrency_key text,
  job_class text,
  executions_count integer
);
CREATE INDEX index_good_jobs_on_scheduled_at ON good_jobs (scheduled_at) WHERE finished_at IS NULL;
CREATE INDEX index_good_jobs_jobs_on_priority_created_at_when_unfinished ON good_jobs (priority DESC NULLS LAST, created_at) WHERE finished_at IS NULL;

-- name: seed
INSERT INTO good_jobs (queue_name, priority, serialized_params, scheduled_at, created_at, updated_at, active_job_id, job_class)
SELECT 'default', 0, '{}'::jsonb, NULL, now() - (%(jobs)s - g) * interval '1 microsecond', now(), gen_random_uuid(), 'ClaimcheckJob'
FROM generate_series(1, %(jobs)s) AS g
RETURNING id;

-- name: remaining
SELECT count(*) FROM good_jobs WHERE finished_at IS NULL;

-- name: pick
SELECT good_jobs.id, good_jobs.active_job_id
FROM good_jobs
WHERE good_jobs.id IN (
  WITH rows AS MATERIALIZED (
    SELECT id, active_job_id
    FROM good_jobs
    WHERE (scheduled_at <= NOW() OR scheduled_at IS NULL) AND finished_at IS NULL
    ORDER BY priority DESC NULLS LAST, created_at ASC
  )
  SELECT id
  FROM rows
  WHERE pg_try_advisory_lock(('x' || substr(md5('good_jobs' || '-' || active_job_id::text), 1, 16))::bit(64)::bigint)
  LIMIT 1
)
ORDER BY priority DESC NULLS LAST, created_at ASC;

-- name: claim
SELECT id FROM good_jobs WHERE id = ANY(%(id)s::uuid[]) AND finished_at IS NULL;

-- name: complete
UPDATE good_jobs SET performed_at = now(), finished_at = now(), updated_at = now(),
       executions_count = coalesce(executions_count, 0) + 1
WHERE id = %(id)s;

-- name: after_commit
SELECT pg_advisory_unlock(('x' || substr(md5('good_jobs' || '-' || active_job_id::text), 1, 16))::bit(64)::bigint)
FROM good_jobs WHERE id = %(id)s;
