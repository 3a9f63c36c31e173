-- The lifecycle statements the built-ins share (a strategy file takes them with the header
-- `-- lifecycle: shared`). From seed 003: each is fenced by status and the attempt number the
-- claim returned, so a worker can only change a job it still owns.

-- name: complete
UPDATE jobs
SET status = 'done', locked_until = NULL
WHERE id = %(id)s AND status = 'running' AND attempts = %(attempts)s;

-- name: fail
-- The seed's retry: back off unit * 2^attempts (20 s after the first failure at the
-- default 10 s unit), capped; failed for good at max_attempts. Fenced like complete.
UPDATE jobs
SET status       = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'queued' END,
    run_at       = now() + least(make_interval(secs => %(backoff_cap_s)s),
                                 make_interval(secs => %(backoff_unit_s)s) * 2 ^ attempts),
    locked_until = NULL,
    last_error   = %(error)s
WHERE id = %(id)s AND status = 'running' AND attempts = %(attempts)s;

-- name: extend
UPDATE jobs
SET locked_until = now() + make_interval(secs => %(lease_seconds)s)
WHERE id = %(id)s AND status = 'running' AND attempts = %(attempts)s;
