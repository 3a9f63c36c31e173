-- expected: safe
-- source: rails/solid_queue v1.5.0 (commit 61a9f08a2bbdf02e60fac2371fbca0553f628dac): app/models/solid_queue/ready_execution.rb (claim, select_and_lock, lock_candidates), app/models/solid_queue/claimed_execution.rb (claiming, finalize, unless_already_finalized), app/models/solid_queue/record.rb (non_blocking_lock); tables from lib/generators/solid_queue/install/templates/db/queue_schema.rb
-- summary: the fix of commit 4f263b25ad40e8dc58eb9fa5de9e987c62620d2f ("Prevent wrong release of blocked jobs and semaphore corruption"); three tables: a ready job has one row in ready_executions; in one transaction a worker locks candidates FOR UPDATE SKIP LOCKED, inserts (job_id, process_id) into claimed_executions (UNIQUE job_id, a second guard), re-reads its claims by job_id and process_id, and deletes the ready rows; finalize locks the claimed row (it must still exist), marks the job finished and deletes the claimed row
--
-- Translation: the three tables in PostgreSQL types (bigserial ids, varchar, timestamp(6)). The
-- ActiveRecord calls rendered as SQL: `pick` is select_candidates for one queue (ordered,
-- limit, non_blocking_lock); the claim is insert_all! (a plain INSERT: a duplicate job_id raises
-- 23505), the delete_all of the ready rows of what this process claimed, and the re-read
-- (where(job_id:, process_id:)) last, so its rows are the claim's; the claimed execution's id is
-- returned as `attempts`: it names this claim, and finalize and release act on it. `complete`
-- is finalize: unless_already_finalized's lock on the claimed row, then job.finished! and
-- destroy!, written as one statement that updates the job only if the claimed row was still
-- there to destroy (its row count is the finalization's). `reap` stands in for pruning a
-- process whose heartbeat is stale (release_all_claimed_executions: dispatch the job again,
-- destroy the claimed row); claimcheck's --reap-every runs it, and a claim older than 300 ms
-- counts as its process's missed heartbeat (solid_queue's threshold is minutes; the run is short).
-- process_id is a number per worker.

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
SELECT * FROM solid_queue_claimed_executions WHERE id = %(attempts)s LIMIT 1 FOR UPDATE;
WITH destroyed AS (
  DELETE FROM solid_queue_claimed_executions WHERE id = %(attempts)s RETURNING job_id
)
UPDATE solid_queue_jobs SET finished_at = now(), updated_at = now()
WHERE id IN (SELECT job_id FROM destroyed)
RETURNING id;

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
