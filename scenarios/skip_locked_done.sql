-- expected: safe
-- seed: 003 "The same pgbench run with SKIP LOCKED instead of the naive statement"
-- summary: claim and completion in one statement through FOR UPDATE SKIP LOCKED.
-- name: claim
WITH next AS (
    SELECT id FROM jobs
    WHERE queue = 'default' AND status = 'queued' AND run_at <= now()
    ORDER BY run_at
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
UPDATE jobs j
SET status = 'done', attempts = j.attempts + 1
FROM next
WHERE j.id = next.id
RETURNING j.id, j.attempts;
