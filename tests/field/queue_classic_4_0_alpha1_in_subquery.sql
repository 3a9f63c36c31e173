-- expected: unsafe
-- source: QueueClassic/queue_classic 4.0.0-alpha1 (commit a6ef2083681844da9c68d738a4849f562f70983b): lib/queue_classic/queue.rb lines 91-125 (lock, delete); table from sql/create_table.sql; the fix: PR #320 (https://github.com/QueueClassic/queue_classic/pull/320, commit 14c9bc527e92d0c1a872618fbdc41268abb485aa), released in 4.0.0 (queue_classic_4_0_skip_locked.sql)
-- summary: UPDATE queue_classic_jobs SET locked_at = now(), locked_by = pg_backend_pid() WHERE id IN (SELECT id ... locked_at IS NULL AND q_name = $1 AND scheduled_at <= now() LIMIT 1 FOR NO KEY UPDATE SKIP LOCKED) RETURNING *; the job is deleted when done
--
-- Translation: create_table.sql as written (its DO block makes args jsonb); the lock statement
-- with q_name 'default'; delete. PR #320: "sometimes the queue lock query locks and returns more
-- than one job row ... the subquery is sometimes being inlined into a nested loop and invoked
-- multiple times for each job row". The statement asks for LIMIT 1, so claimcheck judges it
-- against 1 whatever --batch says (pg_claimcheck.contract.limit). Measured on PostgreSQL 15
-- (tests/benchmarks/field_plans.py): analyzed at 41 jobs, a Hash Semi Join, 1 row; analyzed at
-- 1 job and filled to 41, a Nested Loop Semi Join with the subquery rescanned 41 times, 41 rows;
-- 200 jobs with hashing, sorting and materializing off, 200 rows.

-- name: schema
DO $$ BEGIN

CREATE TABLE queue_classic_jobs (
  id bigserial PRIMARY KEY,
  q_name text NOT NULL CHECK (length(q_name) > 0),
  method text NOT NULL CHECK (length(method) > 0),
  args   text NOT NULL,
  locked_at timestamptz,
  locked_by integer,
  created_at timestamptz DEFAULT now(),
  scheduled_at timestamptz DEFAULT now()
);

-- If jsonb type is available, use it for the args column
IF EXISTS (SELECT 1 FROM pg_type WHERE typname = 'jsonb') THEN
  ALTER TABLE queue_classic_jobs ALTER COLUMN args TYPE jsonb USING args::jsonb;
-- Otherwise, use json type for the args column if available
ELSIF EXISTS (SELECT 1 FROM pg_type WHERE typname = 'json') THEN
  ALTER TABLE queue_classic_jobs ALTER COLUMN args TYPE json USING args::json;
END IF;

END $$ LANGUAGE plpgsql;

CREATE INDEX idx_qc_on_name_only_unlocked ON queue_classic_jobs (q_name, id) WHERE locked_at IS NULL;
CREATE INDEX idx_qc_on_scheduled_at_only_unlocked ON queue_classic_jobs (scheduled_at, id) WHERE locked_at IS NULL;

-- name: seed
INSERT INTO queue_classic_jobs (q_name, method, args, scheduled_at)
SELECT 'default', 'Claimcheck.job', '[]', now() - interval '1 second' FROM generate_series(1, %(jobs)s)
RETURNING id;

-- name: remaining
SELECT count(*) FROM queue_classic_jobs;

-- name: claim
UPDATE queue_classic_jobs SET locked_at = now(), locked_by = pg_backend_pid()
             WHERE id IN ( SELECT id FROM queue_classic_jobs WHERE locked_at IS NULL AND
             q_name = 'default' AND scheduled_at <= now() LIMIT 1 FOR NO KEY UPDATE SKIP LOCKED )
             RETURNING *;

-- name: complete
DELETE FROM queue_classic_jobs WHERE id = %(id)s;
