-- expected: safe
-- seed: 003 "Locking the rows you select fixes the double claim": CTE ... LIMIT n FOR UPDATE
-- summary: a waiter re-checks status on the locked row and moves on, so it is correct, but
--   every worker queues behind the same first rows: workers run one at a time.
-- name: claim
WITH next AS (
    SELECT id FROM jobs
    WHERE queue = 'default' AND status = 'queued' AND run_at <= now()
    ORDER BY run_at
    LIMIT %(batch)s
    FOR UPDATE
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
