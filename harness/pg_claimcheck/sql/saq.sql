-- saq's worker statements, for the pgbench pass of `claimcheck lib saq --pgbench`.
--
-- saq keeps its SQL inline in the methods of saq.queue.postgres.PostgresQueue, so these are copies,
-- made from saq 0.26.4 (saq/queue/postgres.py; pg_claimcheck.libs.saq.SQL_COPIED_FROM names the
-- version, and tests/unit/test_lib_pgbench.py fails when the installed saq is another one). Each is
-- verbatim: `{name}` fields are filled as saq fills them (psycopg.sql), `%(name)s` are its parameters.

-- PostgresQueue._dequeue: run inside the transaction it opens (conn.transaction()).
-- name: dequeue
WITH locked_job AS (
  SELECT key
  FROM {jobs_table}
  WHERE status = 'queued'
    AND queue = %(queue)s
    AND %(now)s >= scheduled
    AND priority BETWEEN %(plow)s AND %(phigh)s
    AND group_key NOT IN (
      SELECT DISTINCT group_key
      FROM {jobs_table}
      WHERE status = 'active'
        AND queue = %(queue)s
        AND group_key IS NOT NULL
    )
  ORDER BY priority, scheduled
  LIMIT %(limit)s
  FOR UPDATE SKIP LOCKED
)
UPDATE {jobs_table} SET status = 'active'
FROM locked_job
WHERE {jobs_table}.key = locked_job.key
RETURNING job

-- PostgresQueue._update: in a transaction of its own (a savepoint inside _dequeue's).
-- name: update
UPDATE {jobs_table} SET
  job = %(job)s
  ,status = %(status)s
  ,scheduled = %(scheduled)s
  {expire_at}
WHERE key = %(key)s

-- PostgresQueue._update's `expire_at` field when it is given (by _finish, for a job with a ttl).
-- name: update_expire_at
,expire_at = %(expire_at)s

-- PostgresQueue._notify, after a dequeue that took jobs.
-- name: notify
NOTIFY {channel}, {key}
