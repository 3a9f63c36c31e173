-- chancy's worker statements, for the pgbench pass of `claimcheck lib chancy --pgbench`.
--
-- chancy keeps its SQL inline in chancy.worker.Worker, so these are copies, made from chancy 0.26.0
-- (chancy/worker.py; pg_claimcheck.libs.chancy.SQL_COPIED_FROM names the version, and --pgbench is
-- refused with another one installed). Each is verbatim, dedented: `{jobs}` is its jobs table
-- (psycopg.sql), `%(name)s` its parameters.

-- Worker.fetch_jobs: run in the transaction it opens (conn.transaction()); the queue has no rate limit.
-- name: fetch
WITH selected_jobs AS (
    SELECT
        id
    FROM
        {jobs}
    WHERE
        queue = %(queue)s
    AND
        (state = 'pending' OR state = 'retrying')
    AND
        attempts < max_attempts
    AND
        (scheduled_at IS NULL OR scheduled_at <= NOW())
    ORDER BY
        priority DESC,
        id ASC
    LIMIT
        %(maximum_jobs_to_fetch)s
    FOR UPDATE OF {jobs} SKIP LOCKED
)
UPDATE
    {jobs}
SET
    started_at = NOW(),
    state = 'running',
    claim_id = gen_random_uuid(),
    taken_by = %(worker_id)s
FROM
    selected_jobs
WHERE
    {jobs}.id = selected_jobs.id
RETURNING {jobs}.*

-- Worker._maintain_updates: one per job of the batch, sent with executemany in one transaction.
-- name: update
UPDATE
    {jobs}
SET
    state = %(state)s,
    started_at = %(started_at)s,
    completed_at = %(completed_at)s,
    scheduled_at = %(scheduled_at)s,
    attempts = %(attempts)s,
    errors = %(errors)s,
    meta = %(meta)s,
    max_attempts = %(max_attempts)s
WHERE
    id = %(id)s
    AND claim_id IS NOT DISTINCT FROM %(claim_id)s
RETURNING id
