-- expected: unsafe
-- summary: Oban 2.14's claim shape on claimcheck's jobs table: the limiting, locking subquery under
--   IN. Safe in the plan a freshly analyzed table gets (a hash join runs the subquery once); under a
--   nested loop it is rescanned per outer row and one UPDATE takes far more than LIMIT rows.
-- lifecycle: shared
-- name: claim
UPDATE jobs
SET status       = 'running',
    attempts     = attempts + 1,
    locked_until = now() + make_interval(secs => %(lease_seconds)s)
WHERE id IN (
    SELECT id FROM jobs
    WHERE queue = 'default' AND status = 'queued' AND run_at <= now()
    ORDER BY id
    LIMIT %(batch)s
    FOR UPDATE SKIP LOCKED
)
RETURNING id, attempts;

