-- expected: unsafe
-- seed: 000 "Who is affected": SELECT pending rows, then UPDATE by id, even in one transaction
-- summary: the pick is a plain read; by the time the UPDATE runs, another worker may own
--   the rows, and "id = ANY(...)" still matches them.
-- lifecycle: shared
-- name: pick
SELECT id FROM jobs
WHERE queue = 'default' AND status = 'queued' AND run_at <= now()
ORDER BY run_at
LIMIT %(batch)s;

-- name: claim
UPDATE jobs
SET status       = 'running',
    attempts     = attempts + 1,
    locked_until = now() + make_interval(secs => %(lease_seconds)s)
WHERE id = ANY(%(ids)s)
RETURNING id, attempts;
