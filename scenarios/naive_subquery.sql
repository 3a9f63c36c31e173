-- expected: unsafe
-- seed: 000 "Reproducing it": UPDATE ... WHERE id IN (SELECT ... LIMIT 10)
-- summary: the claimable condition lives only in the subquery, which is not re-evaluated
--   when the UPDATE waits for a row lock; the waiter re-claims the same rows.
-- lifecycle: shared
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
