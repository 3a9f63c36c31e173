-- expected: unsafe
-- source: mbuhot/ecto_job v2.0.0 (commit 70c14a25cb4f767bf17904f4a13e1bcc2ad7e5b5): lib/ecto_job/job_queue.ex lines 250-276 (reserve_available_jobs, available_jobs), update_job_in_progress and initial_multi; table from lib/ecto_job/migrations.ex; the fix: PR #43 (commit 73e71856b4a6df9a095b821039882a5b6e252f20, merged as 44f35e31930f5a218f433daedbd662ed8013e9f1)
-- summary: UPDATE jobs SET state = 'RESERVED', expires = now + timeout FROM (SELECT id ... state = 'AVAILABLE' ORDER BY schedule, id LIMIT demand FOR UPDATE SKIP LOCKED) AS s1 WHERE id = s1.id RETURNING *
--
-- Translation: the CreateJobTable migration (queue table "jobs", with the fn_notify_inserted
-- trigger of the Install migration; Ecto's timestamps() as timestamp(0), :utc_datetime_usec as
-- timestamp, :map as jsonb); demand as %(batch)s, the reservation timeout as ecto_job's default
-- 300 s. The worker's lifecycle after the reservation runs as one `complete` section:
-- update_job_in_progress (fenced by the attempt the reservation returned, state RESERVED and the
-- expiry), then the user's Multi with initial_multi's delete (optimistic_lock on the attempt).
-- The reservation is Ecto's update_all over `join: x in subquery(query)` ("Ecto doesn't support
-- subquery in where clause, so use join as workaround"), rendered as UPDATE ... FROM (subquery).
-- The fix's commit message: "the subquery may be executed multiple times depending on postgresql
-- query planner" (issue #38). Measured on PostgreSQL 15 (tests/benchmarks/field_plans.py,
-- %(batch)s = 2): analyzed at 41 jobs, a Hash Join reads the subquery once, 2 rows; analyzed at
-- 1 job and filled to 41, a Nested Loop with the subquery on its inner side rescanned 41 times,
-- 41 rows. With enable_hashjoin, _hashagg, _sort and _material off (200 analyzed jobs) it holds:
-- an inner join may put either side outside, and the planner put the subquery (2 rows
-- estimated) outside, run once; the IN (subquery) claims are semi joins, whose subquery is the
-- inner side there.

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

-- name: claim
UPDATE "jobs" AS j0
SET "state" = 'RESERVED', "expires" = timezone('UTC', now()) + interval '300 seconds', "updated_at" = timezone('UTC', now())
FROM (SELECT sj0."id" AS "id" FROM "jobs" AS sj0
      WHERE (sj0."state" = 'AVAILABLE')
      ORDER BY sj0."schedule", sj0."id"
      LIMIT %(batch)s FOR UPDATE SKIP LOCKED) AS s1
WHERE (j0."id" = s1."id")
RETURNING j0.*;

-- name: complete
UPDATE "jobs" AS j0 SET "attempt" = %(attempts)s + 1, "state" = 'IN_PROGRESS',
  "expires" = timezone('UTC', now()) + interval '300 seconds', "updated_at" = timezone('UTC', now())
WHERE (j0."id" = %(id)s) AND (j0."attempt" = %(attempts)s) AND (j0."state" = 'RESERVED')
  AND (j0."expires" >= timezone('UTC', now()));
DELETE FROM "jobs" WHERE "id" = %(id)s AND "attempt" = %(attempts)s + 1;
