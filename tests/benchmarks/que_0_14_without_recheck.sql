-- expected: unsafe
-- A benchmark design, not a field case: tests/field/que_0_14_session_advisory.sql with its claim
-- (que's check_job, the re-check of the locked job in a new statement snapshot) replaced by the
-- picked ids returned as they are. What que's re-check guards against is then open: a pick whose
-- snapshot predates another worker's DELETE takes the advisory lock that worker released after
-- its commit, and runs the job again. tests/benchmarks/timing_conditions.py --file measures which
-- condition catches it.
-- summary: que 0.14's session advisory lock without the re-check after locking

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
SELECT unnest(%(job_id)s::bigint[]) AS job_id;

-- name: complete
DELETE FROM que_jobs
WHERE job_id = %(id)s;

-- name: after_commit
SELECT pg_advisory_unlock(%(id)s);
