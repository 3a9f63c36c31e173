-- expected: safe
-- source: riverqueue/river v0.43.0 (commit 60435dc2c58e3d3dfbde6a00f08bc98a3f13c37e): riverdriver/riverpgxv5/internal/dbsqlc/river_job.sql lines 1-38 (schema), 200-237 (JobGetAvailable), 620-699 (JobSetStateIfRunningMany); index from riverdriver/riverpgxv5/migration/main/002_initial_schema.up.sql line 56
-- summary: CTE SELECT * ... state = 'available' FOR UPDATE SKIP LOCKED, then state 'running', attempt + 1, attempted_by appended; completion sets the state only if the row is still running
--
-- Translation: the enum, table and fetch index (schema template empty). JobGetAvailable with
-- queue 'default', now() for the narg, %(batch)s as max_to_lock, %(worker)s as attempted_by,
-- max_attempted_by 100. The completion is JobSetStateIfRunningMany for one job going to
-- 'completed' with finalized_at (every CASE reduced for that input: no attempt, error,
-- metadata or scheduled_at update), and it returns the row it updated.

-- name: schema
CREATE TYPE river_job_state AS ENUM(
    'available',
    'cancelled',
    'completed',
    'discarded',
    'pending',
    'retryable',
    'running',
    'scheduled'
);
CREATE TABLE river_job (
    id bigserial PRIMARY KEY,
    args jsonb NOT NULL DEFAULT '{}',
    attempt smallint NOT NULL DEFAULT 0,
    attempted_at timestamptz,
    attempted_by text[],
    created_at timestamptz NOT NULL DEFAULT now(),
    errors jsonb[],
    finalized_at timestamptz,
    kind text NOT NULL,
    max_attempts smallint NOT NULL DEFAULT 25,
    metadata jsonb NOT NULL DEFAULT '{}',
    priority smallint NOT NULL DEFAULT 1,
    queue text NOT NULL DEFAULT 'default',
    state river_job_state NOT NULL DEFAULT 'available',
    scheduled_at timestamptz NOT NULL DEFAULT now(),
    tags varchar(255)[] NOT NULL DEFAULT '{}',
    unique_key bytea,
    unique_states bit(8),
    CONSTRAINT finalized_or_finalized_at_null CHECK (
        (finalized_at IS NULL AND state NOT IN ('cancelled', 'completed', 'discarded')) OR
        (finalized_at IS NOT NULL AND state IN ('cancelled', 'completed', 'discarded'))
    ),
    CONSTRAINT priority_in_range CHECK (priority >= 1 AND priority <= 4),
    CONSTRAINT queue_length CHECK (char_length(queue) > 0 AND char_length(queue) < 128),
    CONSTRAINT kind_length CHECK (char_length(kind) > 0 AND char_length(kind) < 128)
);
CREATE INDEX river_job_prioritized_fetching_index ON river_job USING btree(state, queue, priority, scheduled_at, id);

-- name: seed
INSERT INTO river_job (kind, scheduled_at)
SELECT 'claimcheck', now() - (%(jobs)s - g) * interval '1 microsecond' - interval '1 second' FROM generate_series(1, %(jobs)s) g
RETURNING id;

-- name: remaining
SELECT count(*) FROM river_job WHERE finalized_at IS NULL;

-- name: claim
WITH locked_jobs AS (
    SELECT
        *
    FROM
        river_job
    WHERE
        state = 'available'
        AND queue = 'default'::text
        AND scheduled_at <= coalesce(NULL::timestamptz, now())
    ORDER BY
        priority ASC,
        scheduled_at ASC,
        id ASC
    LIMIT %(batch)s::integer
    FOR UPDATE
    SKIP LOCKED
)
UPDATE
    river_job
SET
    state = 'running',
    attempt = river_job.attempt + 1,
    attempted_at = coalesce(NULL::timestamptz, now()),
    attempted_by = array_append(
        CASE WHEN array_length(river_job.attempted_by, 1) >= 100::int
        THEN river_job.attempted_by[array_length(river_job.attempted_by, 1) + 2 - 100:]
        ELSE river_job.attempted_by
        END,
        %(worker)s::text
    )
FROM
    locked_jobs
WHERE
    river_job.id = locked_jobs.id
RETURNING
    river_job.*;

-- name: complete
UPDATE river_job
SET finalized_at = now(), state = 'completed'
WHERE river_job.id = %(id)s AND river_job.state = 'running'
RETURNING river_job.*;
