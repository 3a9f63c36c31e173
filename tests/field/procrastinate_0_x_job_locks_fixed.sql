-- expected: safe
-- source: procrastinate-org/procrastinate commit 7c4fa78c20e787f264f9c884c600a3f4320aeb1b ("Fixes #103: race condition in locks", PR #104) on top of 4f0cbdbd42f8 (procrastinate_job_locks.object PRIMARY KEY): procrastinate/sql/structure.sql (procrastinate_jobs, procrastinate_job_locks, procrastinate_fetch_job, procrastinate_finish_job), state of cdaf097a0ab14f58728ee566816e3957641fec53 plus the fix's diff
-- summary: two tables: jobs and job_locks; fetch locks a todo job FOR UPDATE OF jobs SKIP LOCKED, inserts its lock object ON CONFLICT DO NOTHING and marks the job doing only if the insert happened; finish updates the job and deletes its lock row
--
-- Translation: the job status enum and the tables of structure.sql (events table left out: nothing
-- in fetch or finish touches it), the fixed fetch function, and finish_job; the worker calls
-- `SELECT * FROM procrastinate_fetch_job(...)` and keeps a row with a non-NULL id, as
-- procrastinate's job manager does. Each job gets its own lock value (`lock` is optional in
-- procrastinate; the per-lock exclusion is what #103 was about, per-job uniqueness is what this
-- run judges). finish_job is given 'succeeded'.

-- name: schema
CREATE TYPE procrastinate_job_status AS ENUM ('todo', 'doing', 'succeeded', 'failed');
CREATE TABLE procrastinate_jobs (
    id bigserial PRIMARY KEY,
    queue_name character varying(128) NOT NULL,
    task_name character varying(128) NOT NULL,
    lock text,
    args jsonb DEFAULT '{}' NOT NULL,
    status procrastinate_job_status DEFAULT 'todo'::procrastinate_job_status NOT NULL,
    scheduled_at timestamp with time zone NULL,
    started_at timestamp with time zone NULL,
    attempts integer DEFAULT 0 NOT NULL
);
CREATE TABLE procrastinate_job_locks (
    object text PRIMARY KEY
);
CREATE FUNCTION procrastinate_fetch_job(target_queue_names character varying[]) RETURNS procrastinate_jobs
    LANGUAGE plpgsql
    AS $$
DECLARE
	found_jobs procrastinate_jobs;
BEGIN
	WITH potential_job AS (
		SELECT procrastinate_jobs.*
			FROM procrastinate_jobs
			LEFT JOIN procrastinate_job_locks ON procrastinate_job_locks.object = procrastinate_jobs.lock
			WHERE (target_queue_names IS NULL OR queue_name = ANY( target_queue_names ))
			  AND procrastinate_job_locks.object IS NULL
			  AND status = 'todo'
			  AND (scheduled_at IS NULL OR scheduled_at <= now())
            ORDER BY id ASC
			FOR UPDATE OF procrastinate_jobs SKIP LOCKED LIMIT 1
	), lock_object AS (
		INSERT INTO procrastinate_job_locks
			SELECT lock FROM potential_job
            ON CONFLICT DO NOTHING
            RETURNING object
	)
	UPDATE procrastinate_jobs
		SET status = 'doing',
            started_at = NOW()
		FROM potential_job, lock_object
        WHERE lock_object.object IS NOT NULL
		AND procrastinate_jobs.id = potential_job.id
		RETURNING * INTO found_jobs;

	RETURN found_jobs;
END;
$$;
CREATE FUNCTION procrastinate_finish_job(job_id integer, end_status procrastinate_job_status, next_scheduled_at timestamp with time zone) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
	WITH finished_job AS (
		UPDATE procrastinate_jobs
        SET status = end_status,
            attempts = attempts + 1,
            scheduled_at = COALESCE(next_scheduled_at, scheduled_at)
        WHERE id = job_id RETURNING lock
	)
	DELETE FROM procrastinate_job_locks WHERE object = (SELECT lock FROM finished_job);
END;
$$;

-- name: seed
INSERT INTO procrastinate_jobs (queue_name, task_name, lock)
SELECT 'default', 'claimcheck_task', 'lock-' || g FROM generate_series(1, %(jobs)s) g
RETURNING id;

-- name: remaining
SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing');

-- name: claim
SELECT id, attempts FROM procrastinate_fetch_job(NULL) WHERE id IS NOT NULL;

-- name: complete
SELECT procrastinate_finish_job(%(id)s, 'succeeded', NULL);
