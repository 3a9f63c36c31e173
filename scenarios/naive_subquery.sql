-- expected: unsafe
-- seed: 000 "Reproducing it": UPDATE ... WHERE id IN (SELECT ... LIMIT 10)
-- summary: the claimable condition lives only in the subquery, which is not re-evaluated
--   when the UPDATE waits for a row lock; the waiter re-claims the same rows.
-- name: claim
UPDATE jobs
SET status       = 'running',
    attempts     = attempts + 1,
    locked_until = now() + make_interval(secs => %(lease_seconds)s)
WHERE id IN (
    SELECT id FROM jobs
    WHERE queue = 'default' AND status = 'queued' AND run_at <= now()
    ORDER BY run_at
    LIMIT %(batch)s
)
RETURNING id, attempts;

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
