-- expected: unsafe
-- seed: 000 "Who is affected": a CTE without row locks
-- summary: the CTE's rows are joined, not re-checked; after waiting for a row lock the
--   UPDATE re-evaluates only "j.id = picked.id".
-- lifecycle: shared
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
