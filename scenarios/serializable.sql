-- isolation: serializable
-- expected: safe
-- seed: 000 "Alternatives and trade-offs": the original query under SERIALIZABLE
-- summary: the naive statement, but a collision raises 40001 "could not serialize access"
--   instead of double claiming; the driver retries and counts every failure.
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
