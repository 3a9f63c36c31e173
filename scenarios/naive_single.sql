-- expected: unsafe
-- seed: 003 "the version most people write first": UPDATE ... WHERE id = (SELECT ... LIMIT 1)
-- summary: one job per claim; the scalar subquery is computed once, so a waiter re-claims
--   the row its predecessor took (attempts 1, then 2) and the next job stays queued.
-- lifecycle: shared
-- name: claim
UPDATE jobs
SET status       = 'running',
    attempts     = attempts + 1,
    locked_until = now() + make_interval(secs => %(lease_seconds)s)
WHERE id = (
    SELECT id FROM jobs
    WHERE queue = 'default' AND status = 'queued' AND run_at <= now()
    ORDER BY run_at
    LIMIT 1
)
RETURNING id, attempts;
