-- expected: unsafe
-- seed: 003 "we ran eight workers with pgbench": naive.sql, the naive statement with status = 'done'
-- summary: claim and completion in one statement, as in the seed's pgbench run; with eight
--   workers most claims land on jobs another worker already finished.
-- name: claim
UPDATE jobs
SET status = 'done', attempts = attempts + 1
WHERE id = (
    SELECT id FROM jobs
    WHERE queue = 'default' AND status = 'queued' AND run_at <= now()
    ORDER BY run_at
    LIMIT 1
)
RETURNING id, attempts;
