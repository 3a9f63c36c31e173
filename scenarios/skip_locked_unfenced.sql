-- expected: unsafe
-- seed: 000 "The fix": the completion is fenced by worker only (here: not at all), not by the attempt
-- summary: the skip-locked claim, but complete and fail forget the attempt number: a worker
--   that stalled past its lease marks done a job another worker now owns (a stale completion).
-- name: claim
WITH next AS (
    SELECT id FROM jobs
    WHERE queue = 'default' AND status = 'queued' AND run_at <= now()
    ORDER BY run_at
    LIMIT %(batch)s
    FOR UPDATE SKIP LOCKED
)
UPDATE jobs j
SET status       = 'running',
    attempts     = j.attempts + 1,
    locked_until = now() + make_interval(secs => %(lease_seconds)s)
FROM next
WHERE j.id = next.id
RETURNING j.id, j.attempts;

-- name: complete
UPDATE jobs
SET status = 'done', locked_until = NULL
WHERE id = %(id)s;

-- name: fail
UPDATE jobs
SET status       = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'queued' END,
    run_at       = now() + least(make_interval(secs => %(backoff_cap_s)s),
                                 make_interval(secs => %(backoff_unit_s)s) * 2 ^ attempts),
    locked_until = NULL,
    last_error   = %(error)s
WHERE id = %(id)s;

-- name: extend
UPDATE jobs
SET locked_until = now() + make_interval(secs => %(lease_seconds)s)
WHERE id = %(id)s AND status = 'running' AND attempts = %(attempts)s;
