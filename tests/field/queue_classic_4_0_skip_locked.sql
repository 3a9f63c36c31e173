-- expected: safe
-- source: QueueClassic/queue_classic 4.0.0 (commit ac45544c1368176503b976dad42dd0aee0be5334): lib/queue_classic/queue.rb (lock, delete); table from sql/create_table.sql
-- summary: CTE SELECT id ... LIMIT 1 FOR NO KEY UPDATE SKIP LOCKED, then UPDATE ... SET locked_at = now(), locked_by = pg_backend_pid() FROM selected_job RETURNING *; the job is deleted when done
--
-- Translation: the table as created (json args); the lock statement with q_name 'default'; delete.

-- name: schema
CREATE TABLE queue_classic_jobs (
  id bigserial PRIMARY KEY,
  q_name text not null check (length(q_name) > 0),
  method text not null check (length(method) > 0),
  args   json not null,
  locked_at timestamptz,
  locked_by integer,
  created_at timestamptz default now(),
  scheduled_at timestamptz default now()
);
CREATE INDEX idx_qc_on_name_only_unlocked ON queue_classic_jobs (q_name, id) WHERE locked_at IS NULL;
CREATE INDEX idx_qc_on_scheduled_at_only_unlocked ON queue_classic_jobs (scheduled_at, id) WHERE locked_at IS NULL;

-- name: seed
INSERT INTO queue_classic_jobs (q_name, method, args, scheduled_at)
SELECT 'default', 'Claimcheck.job', '[]', now() - interval '1 second' FROM generate_series(1, %(jobs)s)
RETURNING id;

-- name: remaining
SELECT count(*) FROM queue_classic_jobs;

-- name: claim
WITH selected_job AS (
  SELECT id
  FROM queue_classic_jobs
  WHERE
    locked_at IS NULL AND
    q_name = 'default' AND
    scheduled_at <= now()
  LIMIT 1
  FOR NO KEY UPDATE SKIP LOCKED
)
UPDATE queue_classic_jobs
SET
  locked_at = now(),
  locked_by = pg_backend_pid()
FROM selected_job
WHERE queue_classic_jobs.id = selected_job.id
RETURNING *;

-- name: complete
DELETE FROM queue_classic_jobs WHERE id = %(id)s;
