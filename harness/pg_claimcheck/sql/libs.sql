-- What the library adapters read from the libraries' own tables after (and during) a run.
-- Reads only, but for the `_reset` statements, which empty a library's tables between its own
-- workers' run and the pgbench pass (`--pgbench`): every claim, completion and retry goes through
-- the library's own API or its own statements. Each runs in the run's own database, so the
-- libraries' fixed table names are ours alone.

-- name: procrastinate_outcome
-- procrastinate keeps finished jobs (delete_jobs="never", its default), status in its own enum.
SELECT count(*) FILTER (WHERE status = 'succeeded')                    AS done,
       count(*) FILTER (WHERE status = 'todo')                         AS queued,
       count(*) FILTER (WHERE status = 'doing')                        AS running,
       count(*) FILTER (WHERE status IN ('failed', 'cancelled', 'aborted')) AS failed,
       coalesce(max(attempts), 0)                                      AS max_attempts
FROM procrastinate_jobs;

-- name: procrastinate_status
SELECT (args ->> 'key')::bigint, status::text, attempts FROM procrastinate_jobs
WHERE (args ->> 'key')::bigint = ANY(%(keys)s);

-- name: pgqueuer_outcome
-- pgqueuer deletes a job when it finishes and writes its fate to pgqueuer_log: a job is done
-- once the log has a final status for it and the queue no longer holds it.
WITH final AS (
    SELECT DISTINCT ON (job_id) job_id, status::text AS status
    FROM pgqueuer_log
    WHERE status::text IN ('successful', 'exception', 'canceled', 'deleted', 'failed')
    ORDER BY job_id, id DESC
), queue AS (
    SELECT count(*) FILTER (WHERE status = 'queued') AS queued,
           count(*) FILTER (WHERE status = 'picked') AS running,
           coalesce(max(attempts), 0)                AS max_attempts
    FROM pgqueuer
)
SELECT (SELECT count(*) FROM final WHERE status = 'successful')  AS done,
       queue.queued, queue.running,
       (SELECT count(*) FROM final WHERE status <> 'successful') AS failed,
       queue.max_attempts
FROM queue;

-- name: pgqueuer_status
-- The fate of each job in pgqueuer's words: its row while queued or picked, else its last log entry.
WITH wanted AS (SELECT unnest(%(ids)s::bigint[]) AS job_id)
SELECT w.job_id,
       coalesce(q.status::text, (SELECT l.status::text FROM pgqueuer_log l WHERE l.job_id = w.job_id
                                 ORDER BY l.id DESC LIMIT 1), 'unknown'),
       coalesce(q.attempts, 0)
FROM wanted w LEFT JOIN pgqueuer q ON q.id = w.job_id;

-- name: procrastinate_unfinished
SELECT (args ->> 'key')::bigint, id, status::text, attempts, worker_id FROM procrastinate_jobs
WHERE status IN ('todo', 'doing') ORDER BY id LIMIT %(limit)s;

-- name: pgqueuer_unfinished
SELECT convert_from(payload, 'UTF8')::bigint, id, status::text, attempts, queue_manager_id FROM pgqueuer
WHERE status IN ('queued', 'picked') ORDER BY id LIMIT %(limit)s;

-- name: saq_outcome
-- saq keeps finished jobs until their ttl; each row's job is the serialized Job (JSON).
SELECT count(*) FILTER (WHERE status = 'complete')                             AS done,
       count(*) FILTER (WHERE status IN ('new', 'deferred', 'queued'))         AS queued,
       count(*) FILTER (WHERE status IN ('active', 'aborting'))                AS running,
       count(*) FILTER (WHERE status IN ('failed', 'aborted'))                 AS failed,
       coalesce(max((convert_from(job, 'UTF8')::jsonb ->> 'attempts')::int), 0) AS max_attempts
FROM saq_jobs;

-- name: saq_status
SELECT key::bigint, status, coalesce((convert_from(job, 'UTF8')::jsonb ->> 'attempts')::int, 0)
FROM saq_jobs WHERE key = ANY(%(keys)s::text[]);

-- name: saq_unfinished
SELECT key::bigint, key, status, coalesce((convert_from(job, 'UTF8')::jsonb ->> 'attempts')::int, 0),
       convert_from(job, 'UTF8')::jsonb ->> 'worker_id'
FROM saq_jobs WHERE status NOT IN ('complete', 'failed', 'aborted') ORDER BY 1 LIMIT %(limit)s;

-- name: procrastinate_reset
-- Workers too: the pgbench pass registers one per client, as each worker does when it starts.
TRUNCATE procrastinate_jobs, procrastinate_events, procrastinate_periodic_defers, procrastinate_workers
RESTART IDENTITY;

-- name: pgqueuer_reset
-- The log too: pgqueuer_outcome counts a job done by its 'successful' log entry.
TRUNCATE pgqueuer, pgqueuer_log, pgqueuer_statistics RESTART IDENTITY;

-- name: saq_reset
-- Not saq_versions: that is saq's record of its applied migrations.
TRUNCATE saq_jobs, saq_stats;

-- name: pg_boss_outcome
-- pg-boss 10 keeps a job's row in pgboss.job (partitioned by queue) until its archive interval
-- (12 hours by default), in its own state enum; retry_count counts the attempts before this one.
SELECT count(*) FILTER (WHERE state = 'completed')                 AS done,
       count(*) FILTER (WHERE state IN ('created', 'retry'))       AS queued,
       count(*) FILTER (WHERE state = 'active')                    AS running,
       count(*) FILTER (WHERE state IN ('failed', 'cancelled'))    AS failed,
       coalesce(max(retry_count) + 1, 0)                           AS max_attempts
FROM pgboss.job;

-- name: pg_boss_status
SELECT (data ->> 'key')::bigint, state::text, retry_count + 1 FROM pgboss.job
WHERE (data ->> 'key')::bigint = ANY(%(keys)s);

-- name: pg_boss_unfinished
SELECT (data ->> 'key')::bigint, id, state::text, retry_count + 1, ''
FROM pgboss.job WHERE state IN ('created', 'retry', 'active') ORDER BY 1 LIMIT %(limit)s;

-- name: pg_boss_reset
DELETE FROM pgboss.job;

-- name: graphile_worker_outcome
-- graphile-worker deletes a job when it succeeds: what is left is queued, locked (running) or
-- failed for good (attempts = max_attempts); done is the jobs enqueued less those left.
SELECT %(enqueued)s - count(*)                                                    AS done,
       count(*) FILTER (WHERE locked_at IS NULL AND attempts < max_attempts)      AS queued,
       count(*) FILTER (WHERE locked_at IS NOT NULL)                              AS running,
       count(*) FILTER (WHERE locked_at IS NULL AND attempts >= max_attempts)     AS failed,
       coalesce(max(attempts), 0)                                                 AS max_attempts
FROM graphile_worker._private_jobs;

-- name: graphile_worker_status
-- A key no longer in the table succeeded (graphile-worker deleted it).
WITH wanted AS (SELECT unnest(%(keys)s::bigint[]) AS key)
SELECT w.key,
       CASE WHEN j.id IS NULL THEN 'completed (deleted)'
            WHEN j.locked_at IS NOT NULL THEN 'locked by ' || j.locked_by
            WHEN j.attempts >= j.max_attempts THEN 'failed'
            ELSE 'queued' END,
       coalesce(j.attempts, 0)
FROM wanted w LEFT JOIN graphile_worker._private_jobs j ON (j.payload ->> 'key')::bigint = w.key;

-- name: graphile_worker_unfinished
SELECT (payload ->> 'key')::bigint, id, CASE WHEN locked_at IS NULL THEN 'queued' ELSE 'locked' END, attempts,
       coalesce(locked_by, '')
FROM graphile_worker._private_jobs WHERE attempts < max_attempts ORDER BY id LIMIT %(limit)s;

-- name: graphile_worker_locked_by
-- The jobs the given (dead) workers hold, before graphile_worker_force_unlock gives them back.
SELECT (payload ->> 'key')::bigint FROM graphile_worker._private_jobs WHERE locked_by = ANY(%(workers)s::text[]);

-- name: graphile_worker_force_unlock
-- Exactly what graphile-worker's WorkerUtils.forceUnlockWorkers sends (dist/workerUtils.js): its
-- documented way to release the jobs of workers "no longer running (crashed, were terminated...)".
SELECT graphile_worker.force_unlock_workers(%(workers)s::text[]);

-- name: graphile_worker_reset
TRUNCATE graphile_worker._private_jobs, graphile_worker._private_job_queues RESTART IDENTITY CASCADE;

-- name: bullmq_outcome
-- BullMQ's PostgreSQL backend keeps a job's row in bullmq.job (completed and failed ones too, by
-- default), its life in `state`; attempts_started counts the claims of it.
SELECT count(*) FILTER (WHERE state = 'completed')                 AS done,
       count(*) FILTER (WHERE state IN ('waiting', 'delayed'))     AS queued,
       count(*) FILTER (WHERE state = 'active')                    AS running,
       count(*) FILTER (WHERE state = 'failed')                    AS failed,
       coalesce(max(attempts_started), 0)                          AS max_attempts
FROM bullmq.job;

-- name: bullmq_status
SELECT (data ->> 'key')::bigint, state::text, attempts_started FROM bullmq.job
WHERE (data ->> 'key')::bigint = ANY(%(keys)s);

-- name: bullmq_unfinished
SELECT (data ->> 'key')::bigint, id, state::text, attempts_started, coalesce(processed_by, '')
FROM bullmq.job WHERE state NOT IN ('completed', 'failed') ORDER BY 1 LIMIT %(limit)s;

-- name: delayed_job_outcome
-- delayed_job deletes a job when it succeeds (failed ones stay, failed_at set: the adapter turns off
-- destroy_failed_jobs); done is the jobs enqueued less those left. Its handler is the job's YAML
-- (`--- !ruby/struct:ClaimcheckJob` then `key: K`); attempts counts the failed runs.
SELECT %(enqueued)s - count(*)                                                    AS done,
       count(*) FILTER (WHERE failed_at IS NULL AND locked_at IS NULL)            AS queued,
       count(*) FILTER (WHERE failed_at IS NULL AND locked_at IS NOT NULL)        AS running,
       count(*) FILTER (WHERE failed_at IS NOT NULL)                              AS failed,
       coalesce(max(attempts) + 1, 0)                                             AS max_attempts
FROM delayed_jobs;

-- name: delayed_job_status
WITH wanted AS (SELECT unnest(%(keys)s::bigint[]) AS key)
SELECT w.key,
       CASE WHEN j.id IS NULL THEN 'completed (deleted)'
            WHEN j.failed_at IS NOT NULL THEN 'failed'
            WHEN j.locked_at IS NOT NULL THEN 'locked by ' || j.locked_by
            ELSE 'queued' END,
       coalesce(j.attempts + 1, 1)
FROM wanted w LEFT JOIN delayed_jobs j ON substring(j.handler FROM 'key: (\d+)')::bigint = w.key;

-- name: delayed_job_unfinished
SELECT substring(handler FROM 'key: (\d+)')::bigint, id, CASE WHEN locked_at IS NULL THEN 'queued' ELSE 'locked' END,
       attempts + 1, coalesce(locked_by, '')
FROM delayed_jobs WHERE failed_at IS NULL ORDER BY id LIMIT %(limit)s;

-- name: huey_outcome
-- huey deletes a task from huey_task when a consumer takes it and stores the task's return value in
-- huey_kv under the task id: done = results stored, queued = tasks still in the queue (the adapter
-- counts the rest, taken and not done, as running).
SELECT (SELECT count(*) FROM huey_kv WHERE queue = %(queue)s)   AS done,
       (SELECT count(*) FROM huey_task WHERE queue = %(queue)s) AS queued;

-- name: huey_status
-- Each key's fate in huey's words: its result stored, still queued (its id inside a pickled task),
-- or taken and gone (dequeued, no result: lost, if nothing still runs it).
SELECT k, CASE WHEN EXISTS (SELECT 1 FROM huey_kv WHERE queue = %(queue)s AND key = 'cc' || k || '.') THEN 'result stored'
               WHEN EXISTS (SELECT 1 FROM huey_task WHERE queue = %(queue)s
                            AND position(convert_to('cc' || k || '.', 'UTF8') IN data) > 0) THEN 'queued'
               ELSE 'dequeued, no result' END
FROM unnest(%(keys)s::bigint[]) AS k;

-- name: huey_unfinished
SELECT k, CASE WHEN EXISTS (SELECT 1 FROM huey_task WHERE queue = %(queue)s
                            AND position(convert_to('cc' || k || '.', 'UTF8') IN data) > 0) THEN 'queued'
               ELSE 'dequeued, no result' END
FROM generate_series(1, %(total)s::bigint) AS k
WHERE NOT EXISTS (SELECT 1 FROM huey_kv WHERE queue = %(queue)s AND key = 'cc' || k || '.')
ORDER BY k LIMIT %(limit)s;

-- name: huey_reset
TRUNCATE huey_task, huey_kv, huey_schedule, huey_counter RESTART IDENTITY;

-- name: chancy_outcome
-- chancy keeps a job's row (until its Pruner removes old finished ones) in its own states; the key is
-- the job's `n` keyword argument.
SELECT count(*) FILTER (WHERE state = 'succeeded')              AS done,
       count(*) FILTER (WHERE state IN ('pending', 'retrying')) AS queued,
       count(*) FILTER (WHERE state = 'running')                AS running,
       count(*) FILTER (WHERE state = 'failed')                 AS failed,
       coalesce(max(attempts), 0)                               AS max_attempts
FROM chancy_jobs;

-- name: chancy_status
SELECT (kwargs ->> 'n')::bigint, state, attempts FROM chancy_jobs WHERE (kwargs ->> 'n')::bigint = ANY(%(keys)s);

-- name: chancy_unfinished
SELECT (kwargs ->> 'n')::bigint, id, state, attempts, taken_by
FROM chancy_jobs WHERE state NOT IN ('succeeded', 'failed') ORDER BY 1 LIMIT %(limit)s;

-- name: chancy_reset
TRUNCATE chancy_jobs;

-- name: dbos_outcome
-- DBOS keeps a workflow's row in dbos.workflow_status; the key is the workflow id `cc<key>`. A workflow
-- DBOS gave up on after too many recoveries is MAX_RECOVERY_ATTEMPTS_EXCEEDED.
SELECT count(*) FILTER (WHERE status = 'SUCCESS')                                  AS done,
       count(*) FILTER (WHERE status IN ('ENQUEUED', 'DELAYED'))                   AS queued,
       count(*) FILTER (WHERE status = 'PENDING')                                  AS running,
       count(*) FILTER (WHERE status IN ('ERROR', 'CANCELLED', 'MAX_RECOVERY_ATTEMPTS_EXCEEDED')) AS failed,
       coalesce(max(recovery_attempts), 0)                                         AS max_attempts
FROM dbos.workflow_status WHERE left(workflow_uuid, 2) = 'cc';

-- name: dbos_status
SELECT substr(workflow_uuid, 3)::bigint, status, recovery_attempts::int
FROM dbos.workflow_status WHERE left(workflow_uuid, 2) = 'cc' AND substr(workflow_uuid, 3)::bigint = ANY(%(keys)s);

-- name: dbos_unfinished
SELECT substr(workflow_uuid, 3)::bigint, workflow_uuid, status, recovery_attempts, coalesce(executor_id, '')
FROM dbos.workflow_status WHERE left(workflow_uuid, 2) = 'cc' AND status NOT IN ('SUCCESS', 'ERROR', 'CANCELLED')
ORDER BY 1 LIMIT %(limit)s;

-- name: absurd_outcome
-- Absurd keeps each task in absurd.t_<queue> (its state the state of its last run) and each attempt in
-- absurd.r_<queue>; the adapter's queue is `claimcheck`. attempts is the task's highest attempt.
SELECT count(*) FILTER (WHERE state = 'completed')                 AS done,
       count(*) FILTER (WHERE state IN ('pending', 'sleeping'))    AS queued,
       count(*) FILTER (WHERE state = 'running')                   AS running,
       count(*) FILTER (WHERE state IN ('failed', 'cancelled'))    AS failed,
       coalesce(max(attempts), 0)                                  AS max_attempts
FROM absurd.t_claimcheck;

-- name: absurd_status
SELECT (params->>'key')::bigint, state, attempts FROM absurd.t_claimcheck
WHERE (params->>'key')::bigint = ANY(%(keys)s);

-- name: absurd_unfinished
SELECT (t.params->>'key')::bigint, t.task_id, t.state, t.attempts, coalesce(r.claimed_by, '')
FROM absurd.t_claimcheck t LEFT JOIN absurd.r_claimcheck r ON r.run_id = t.last_attempt_run
WHERE t.state NOT IN ('completed', 'failed', 'cancelled') ORDER BY 1 LIMIT %(limit)s;

-- name: absurd_reset
TRUNCATE absurd.t_claimcheck, absurd.r_claimcheck, absurd.c_claimcheck, absurd.e_claimcheck, absurd.w_claimcheck;

-- name: sidequest_outcome
-- sidequest keeps each job in sidequest_jobs (its `args` the enqueue's arguments: [key]); `attempt` counts the
-- runs started (RunTransition). A retried job is `waiting` again; failed and canceled are final.
SELECT count(*) FILTER (WHERE state = 'completed')                 AS done,
       count(*) FILTER (WHERE state = 'waiting')                   AS queued,
       count(*) FILTER (WHERE state IN ('claimed', 'running'))     AS running,
       count(*) FILTER (WHERE state IN ('failed', 'canceled'))     AS failed,
       coalesce(max(attempt), 0)                                   AS max_attempts
FROM sidequest_jobs WHERE queue = 'claimcheck';

-- name: sidequest_status
SELECT (args::jsonb ->> 0)::bigint, state, attempt FROM sidequest_jobs
WHERE queue = 'claimcheck' AND (args::jsonb ->> 0)::bigint = ANY(%(keys)s);

-- name: sidequest_unfinished
SELECT (args::jsonb ->> 0)::bigint, id, state, attempt, coalesce(claimed_by, '')
FROM sidequest_jobs WHERE queue = 'claimcheck' AND state NOT IN ('completed', 'failed', 'canceled')
ORDER BY id LIMIT %(limit)s;
