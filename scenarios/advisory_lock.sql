-- expected: unsafe
-- seed: 000 "Alternatives and trade-offs": pg_try_advisory_xact_lock(id) with LIMIT
-- summary: the lock is released at commit, and a worker whose snapshot predates that commit
--   still sees the job queued, takes the now-free lock and re-claims it; the planner may also
--   lock more rows than LIMIT returns.
-- lifecycle: shared
-- name: claim
UPDATE jobs
SET status       = 'running',
    attempts     = attempts + 1,
    locked_until = now() + make_interval(secs => %(lease_seconds)s)
WHERE id IN (
    SELECT id FROM jobs
    WHERE queue = 'default' AND status = 'queued' AND run_at <= now()
      AND pg_try_advisory_xact_lock(id)
    ORDER BY run_at
    LIMIT %(batch)s
)
RETURNING id, attempts;
