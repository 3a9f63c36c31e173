-- expected: unsafe
-- seed: 000 "Who is affected": a CTE without row locks
-- summary: the CTE's rows are joined, not re-checked; after waiting for a row lock the
--   UPDATE re-evaluates only "j.id = picked.id".
-- name: claim
WITH picked AS (
    SELECT id FROM jobs
    WHERE queue = 'default' AND status = 'queued' AND run_at <= now()
    ORDER BY run_at
    LIMIT %(batch)s
)
UPDATE jobs j
SET status       = 'running',
    attempts     = j.attempts + 1,
    locked_until = now() + make_interval(secs => %(lease_seconds)s)
FROM picked
WHERE j.id = picked.id
RETURNING j.id, j.attempts;

-- name: complete
UPDATE jobs
SET status = 'done', locked_until = NULL
WHERE id = %(id)s AND status = 'running' AND attempts = %(attempts)s;

-- name: fail
-- The seed's retry: back off unit * 2^attempts (20 s after the first failure at the
-- default 10 s unit), capped; failed for good at max_attempts. Fenced like complete.
UPDATE jobs
SET status       = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'queued' END,
    run_at       = now() + least(make_interval(secs => %(backoff_cap_s)s),
                                 make_interval(secs => %(backoff_unit_s)s) * 2 ^ attempts),
    locked_until = NULL,
    last_error   = %(error)s
WHERE id = %(id)s AND status = 'running' AND attempts = %(attempts)s;

-- name: extend
UPDATE jobs
SET locked_until = now() + make_interval(secs => %(lease_seconds)s)
WHERE id = %(id)s AND status = 'running' AND attempts = %(attempts)s;
