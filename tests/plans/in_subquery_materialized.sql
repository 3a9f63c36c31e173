-- expected: safe
-- summary: the same claim with its subquery in a MATERIALIZED CTE: it runs once per statement
--   whatever the plan around it, so the UPDATE takes at most LIMIT rows.
-- lifecycle: shared
-- name: claim
WITH picked AS MATERIALIZED (
    SELECT id FROM jobs
    WHERE queue = 'default' AND status = 'queued' AND run_at <= now()
    ORDER BY id
    LIMIT %(batch)s
    FOR UPDATE SKIP LOCKED
)
UPDATE jobs
SET status       = 'running',
    attempts     = attempts + 1,
    locked_until = now() + make_interval(secs => %(lease_seconds)s)
WHERE id IN (SELECT id FROM picked)
RETURNING id, attempts;

