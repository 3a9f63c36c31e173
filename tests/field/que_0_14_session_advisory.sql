-- expected: safe
-- source: que-rb/que v0.14.3 (commit 45e68691f2599c13b401e2d70cde6f6fbfcac708): lib/que/sql.rb lines 45-116 (lock_job, check_job, destroy_job), lib/que/job.rb lines 109-170 (work: lock, check, run, destroy, unlock in ensure); table from lib/que/migrations/1..3/up.sql
-- summary: session-level pg_try_advisory_lock taken in a recursive CTE, no row lock; the job is re-checked after locking, deleted when done, and unlocked after that commits
--
-- Translation: the table is que_jobs after migrations 1-3. lock_job is `pick` (autocommit in que;
-- here it runs first in the claim's transaction, READ COMMITTED, so it is its own snapshot as
-- in que); check_job is the claim, re-reading the locked job in a new statement snapshot (que's
-- guard against a lock_job snapshot taken before the previous holder's DELETE). destroy_job is
-- `complete`; the unlock que runs in `ensure` is `after_commit`. Queue '' as que's default.

-- name: schema
CREATE TABLE que_jobs
(
  priority    integer     NOT NULL DEFAULT 1,
  run_at      timestamptz NOT NULL DEFAULT now(),
  job_id      bigserial   NOT NULL,
  job_class   text        NOT NULL,
  args        json        NOT NULL DEFAULT '[]'::json,
  error_count integer     NOT NULL DEFAULT 0,
  last_error  text,

  CONSTRAINT que_jobs_pkey PRIMARY KEY (priority, run_at, job_id)
);
ALTER TABLE que_jobs ALTER COLUMN priority SET DEFAULT 100;
ALTER TABLE que_jobs
  DROP CONSTRAINT que_jobs_pkey,
  ALTER COLUMN priority TYPE smallint,
  ADD COLUMN queue TEXT NOT NULL DEFAULT '',
  ADD CONSTRAINT que_jobs_pkey PRIMARY KEY (queue, priority, run_at, job_id);
-- Keys from the run's own range: advisory locks are database-wide.
SELECT setval('que_jobs_job_id_seq', %(key_base)s);

-- name: seed
INSERT INTO que_jobs (queue, priority, run_at, job_class, args)
SELECT '', 100, now() - interval '1 second', 'ClaimcheckJob', '[]'::json FROM generate_series(1, %(jobs)s)
RETURNING job_id;

-- name: remaining
SELECT count(*) FROM que_jobs;

-- name: pick
WITH RECURSIVE jobs AS (
  SELECT (j).*, pg_try_advisory_lock((j).job_id) AS locked
  FROM (
    SELECT j
    FROM que_jobs AS j
    WHERE queue = ''::text
    AND run_at <= now()
    ORDER BY priority, run_at, job_id
    LIMIT 1
  ) AS t1
  UNION ALL (
    SELECT (j).*, pg_try_advisory_lock((j).job_id) AS locked
    FROM (
      SELECT (
        SELECT j
        FROM que_jobs AS j
        WHERE queue = ''::text
        AND run_at <= now()
        AND (priority, run_at, job_id) > (jobs.priority, jobs.run_at, jobs.job_id)
        ORDER BY priority, run_at, job_id
        LIMIT 1
      ) AS j
      FROM jobs
      WHERE jobs.job_id IS NOT NULL
      LIMIT 1
    ) AS t1
  )
)
SELECT queue, priority, run_at, job_id, job_class, args, error_count
FROM jobs
WHERE locked
LIMIT 1;

-- name: claim
SELECT job_id
FROM   que_jobs
WHERE  queue    = ANY(%(queue)s::text[])
AND    priority = ANY(%(priority)s::smallint[])
AND    run_at   = ANY(%(run_at)s::timestamptz[])
AND    job_id   = ANY(%(job_id)s::bigint[]);

-- name: complete
DELETE FROM que_jobs
WHERE job_id = %(id)s;

-- name: after_commit
SELECT pg_advisory_unlock(%(id)s);
