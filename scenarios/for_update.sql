-- expected: safe
-- seed: 003 "Locking the rows you select fixes the double claim": CTE ... LIMIT n FOR UPDATE
-- summary: a waiter re-checks status on the locked row and moves on, so it is correct, but
--   every worker queues behind the same first rows: workers run one at a time.
-- lifecycle: shared
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
