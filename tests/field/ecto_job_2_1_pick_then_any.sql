-- expected: safe
-- source: mbuhot/ecto_job v2.1.0 (commit 2b0fd50b064918834847478818acbe77f561dfc1; PR #43, commit 73e71856b4a6df9a095b821039882a5b6e252f20): lib/ecto_job/job_queue.ex lines 273-305 (reserve_available_jobs, available_jobs), update_job_in_progress and initial_multi; table from lib/ecto_job/migrations.ex
-- summary: in one transaction: SELECT id ... state = 'AVAILABLE' ORDER BY schedule, id LIMIT demand FOR UPDATE SKIP LOCKED, then UPDATE jobs SET state = 'RESERVED' ... WHERE id = ANY(the ids) RETURNING *
--
-- Translation: the CreateJobTable migration (queue table "jobs", with the fn_notify_inserted
-- trigger of the Install migration; Ecto's timestamps() as timestamp(0), :utc_datetime_usec as
-- timestamp, :map as jsonb); demand as %(batch)s, the reservation timeout as ecto_job's default
-- 300 s. The worker's lifecycle after the reservation runs as one `complete` section:
-- update_job_in_progress (fenced by the attempt the reservation returned, state RESERVED and the
-- expiry), then the user's Multi with initial_multi's delete (optimistic_lock on the attempt).
-- PR #43 pulls the ids back to the application ("Force the materialization of the claimed Job
-- IDs, otherwise postgres may return more rows than intended"): the pick, then `= ANY`, as Ecto
-- renders `where: job.id in ^job_ids`. The UPDATE holds no subquery left to rescan: 2 rows for
-- %(batch)s = 2 under every plan tests/benchmarks/field_plans.py tried.

-- name: schema
CREATE FUNCTION fn_notify_inserted()
  RETURNS trigger AS $$
DECLARE
BEGIN
  PERFORM pg_notify(TG_TABLE_NAME, '');
  RETURN NEW;
END;
$$ LANGUAGE plpgsql;

CREATE TABLE jobs (
  id bigserial PRIMARY KEY,
  state varchar(255) NOT NULL DEFAULT 'AVAILABLE',
  expires timestamp,
  schedule timestamp NOT NULL DEFAULT timezone('UTC', now()),
  attempt integer NOT NULL DEFAULT 0,
  max_attempts integer NOT NULL DEFAULT 5,
  params jsonb NOT NULL,
  notify varchar(255),
  inserted_at timestamp(0) NOT NULL,
  updated_at timestamp(0) NOT NULL
);

CREATE TRIGGER tr_notify_inserted_jobs
AFTER INSERT ON jobs
FOR EACH ROW
EXECUTE PROCEDURE fn_notify_inserted();

-- name: seed
INSERT INTO jobs (params, schedule, inserted_at, updated_at)
SELECT '{}', timezone('UTC', now()) - (%(jobs)s - g) * interval '1 microsecond', now(), now()
FROM generate_series(1, %(jobs)s) g
RETURNING id;

-- name: remaining
SELECT count(*) FROM jobs;

-- name: pick
SELECT sj0."id" FROM "jobs" AS sj0
WHERE (sj0."state" = 'AVAILABLE')
ORDER BY sj0."schedule", sj0."id"
LIMIT %(batch)s FOR UPDATE SKIP LOCKED;

-- name: claim
UPDATE "jobs" AS j0
SET "state" = 'RESERVED', "expires" = timezone('UTC', now()) + interval '300 seconds', "updated_at" = timezone('UTC', now())
WHERE (j0."id" = ANY(%(ids)s))
RETURNING j0.*;

-- name: complete
UPDATE "jobs" AS j0 SET "attempt" = %(attempts)s + 1, "state" = 'IN_PROGRESS',
  "expires" = timezone('UTC', now()) + interval '300 seconds', "updated_at" = timezone('UTC', now())
WHERE (j0."id" = %(id)s) AND (j0."attempt" = %(attempts)s) AND (j0."state" = 'RESERVED')
  AND (j0."expires" >= timezone('UTC', now()));
DELETE FROM "jobs" WHERE "id" = %(id)s AND "attempt" = %(attempts)s + 1;
