-- expected: safe
-- seed: 003 "Here is the claim we'll use from now on": CTE ... LIMIT n FOR UPDATE SKIP LOCKED
-- summary: rows locked by another worker are skipped, not waited for: disjoint batches.
-- lifecycle: shared
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
