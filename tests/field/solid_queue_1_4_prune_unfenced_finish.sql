-- expected: unsafe
-- source: rails/solid_queue commit 00fc5ffd86ff3b332666614aaedd4ad177521758 (before 4f263b25ad40e8dc58eb9fa5de9e987c62620d2f, "Prevent wrong release of blocked jobs and semaphore corruption", first in v1.5.0): app/models/solid_queue/claimed_execution.rb (claiming, release, finished); ready_execution.rb and the install schema as in v1.5.0
-- summary: historical double execution: a process whose heartbeat lapsed is pruned and its claimed executions released (the job dispatched again, the claimed row destroyed) while the job still runs; its later `finished` (transaction { job.finished!; destroy! }) marks the job finished without checking that its claimed row still exists, while another worker runs the job again
--
-- Translation: as in solid_queue_1_5_claimed_executions.sql (tables, claim, the reap standing in
-- for the prune after a missed heartbeat), except `complete`, which is this commit's `finished`:
-- destroy! of the claimed row (0 rows when it was released: ActiveRecord does not raise) and
-- job.finished!, unconditionally. The two statements are written in the opposite order so that
-- the section's row count is job.finished!'s (whether the finalization changed the job); in one
-- transaction the order changes nothing else. Commit 4f263b25's message: "Another supervisor
-- prunes it as dead, fails its claimed execution, ... but the original execution keeps running".

-- name: schema
CREATE TABLE solid_queue_jobs (
  id bigserial PRIMARY KEY,
  queue_name varchar NOT NULL,
  class_name varchar NOT NULL,
  arguments text,
  priority integer DEFAULT 0 NOT NULL,
  active_job_id varchar,
  scheduled_at timestamp(6),
  finished_at timestamp(6),
  concurrency_key varchar,
  created_at timestamp(6) NOT NULL,
  updated_at timestamp(6) NOT NULL
);
CREATE INDEX index_solid_queue_jobs_on_finished_at ON solid_queue_jobs (finished_at);
CREATE TABLE solid_queue_ready_executions (
  id bigserial PRIMARY KEY,
  job_id bigint NOT NULL,
  queue_name varchar NOT NULL,
  priority integer DEFAULT 0 NOT NULL,
  created_at timestamp(6) NOT NULL
);
CREATE UNIQUE INDEX index_solid_queue_ready_executions_on_job_id ON solid_queue_ready_executions (job_id);
CREATE INDEX index_solid_queue_poll_all ON solid_queue_ready_executions (priority, job_id);
CREATE INDEX index_solid_queue_poll_by_queue ON solid_queue_ready_executions (queue_name, priority, job_id);
CREATE TABLE solid_queue_claimed_executions (
  id bigserial PRIMARY KEY,
  job_id bigint NOT NULL,
  process_id bigint,
  created_at timestamp(6) NOT NULL
);
CREATE UNIQUE INDEX index_solid_queue_claimed_executions_on_job_id ON solid_queue_claimed_executions (job_id);
CREATE INDEX index_solid_queue_claimed_executions_on_process_id_and_job_id ON solid_queue_claimed_executions (process_id, job_id);

-- name: seed
WITH jobs AS (
  INSERT INTO solid_queue_jobs (queue_name, class_name, arguments, created_at, updated_at)
  SELECT 'default', 'ClaimcheckJob', '[]', now(), now() FROM generate_series(1, %(jobs)s)
  RETURNING id, queue_name, priority
), ready AS (
  INSERT INTO solid_queue_ready_executions (job_id, queue_name, priority, created_at)
  SELECT id, queue_name, priority, now() FROM jobs
)
SELECT id FROM jobs;

-- name: remaining
SELECT count(*) FROM solid_queue_jobs WHERE finished_at IS NULL;

-- name: pick
SELECT id, job_id FROM solid_queue_ready_executions
WHERE queue_name = 'default'
ORDER BY priority ASC, job_id ASC
LIMIT %(batch)s
FOR UPDATE SKIP LOCKED;

-- name: claim
INSERT INTO solid_queue_claimed_executions (job_id, process_id, created_at)
SELECT unnest(%(job_id)s::bigint[]), hashtext(%(worker)s), clock_timestamp();
DELETE FROM solid_queue_ready_executions
WHERE id IN (
  SELECT r.id
  FROM unnest(%(id)s::bigint[], %(job_id)s::bigint[]) AS r(id, job_id)
  JOIN solid_queue_claimed_executions c ON c.job_id = r.job_id AND c.process_id = hashtext(%(worker)s)
);
SELECT job_id, id AS attempts, process_id
FROM solid_queue_claimed_executions
WHERE job_id = ANY(%(job_id)s::bigint[]) AND process_id = hashtext(%(worker)s);

-- name: complete
DELETE FROM solid_queue_claimed_executions WHERE id = %(attempts)s;
UPDATE solid_queue_jobs SET finished_at = now(), updated_at = now() WHERE id = %(id)s;

-- name: reap
WITH released AS (
  DELETE FROM solid_queue_claimed_executions
  WHERE created_at < clock_timestamp() - interval '300 milliseconds'
  RETURNING id, job_id
), dispatched AS (
  INSERT INTO solid_queue_ready_executions (job_id, queue_name, priority, created_at)
  SELECT j.id, j.queue_name, j.priority, now() FROM solid_queue_jobs j JOIN released r ON r.job_id = j.id
)
SELECT job_id, id FROM released;
