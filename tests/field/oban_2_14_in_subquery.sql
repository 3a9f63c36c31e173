-- expected: unsafe
-- source: sorentwo/oban v2.14.2 (commit fe1635733561248ea1658598fc22bf0222f75e11): lib/oban/engines/basic.ex lines 85-128 (fetch_jobs, complete_job); table as in oban_2_18_cte.sql (lib/oban/migrations/postgres/v01.ex and v08.ex); the fix: v2.15.0 (commit 08d9f2e236c2b2919c02384acc29bab09c88dcbb), CHANGELOG.md lines 29-32
-- summary: in a transaction: UPDATE oban_jobs SET state = 'executing', attempt + 1 WHERE id IN (SELECT id ... state = 'available' AND attempt < max_attempts ORDER BY priority, scheduled_at, id LIMIT demand FOR UPDATE SKIP LOCKED) RETURNING *; completion by id
--
-- Translation: the Ecto query (`where j.id in subquery(subset)`, Repo.update_all with
-- `select: j`) rendered as SQL, as oban_2_18_cte.sql renders 2.18's: queue 'default', demand
-- %(batch)s, attempted_by the worker; the same table, so the two files differ only in the claim.
-- Oban 2.15's changelog: "the Postgres planner may choose to generate a plan that executes a
-- nested loop over the LIMITing subquery, causing more UPDATEs than LIMIT ... including
-- attempts > max_attempts". Measured on PostgreSQL 15 (tests/benchmarks/field_plans.py, %(batch)s
-- = 2): analyzed at 41 jobs, a Hash Semi Join reads the subquery once and the claim takes 2;
-- analyzed at 1 job and filled to 41 (autovacuum off), a Nested Loop Semi Join rescans the
-- subquery 41 times (LockRows loops=41) and the claim takes all 41; at 200 analyzed jobs with
-- enable_hashjoin, _hashagg, _sort and _material off it takes all 200. A plain `check` on fresh
-- statistics gets the first plan: see docs/field.md.

-- name: schema
CREATE TYPE oban_job_state AS ENUM ('available', 'scheduled', 'executing', 'retryable', 'completed', 'discarded');
CREATE TABLE oban_jobs (
  id bigserial PRIMARY KEY,
  state oban_job_state NOT NULL DEFAULT 'available',
  queue text NOT NULL DEFAULT 'default',
  worker text NOT NULL,
  args jsonb NOT NULL,
  errors jsonb[] NOT NULL DEFAULT '{}',
  attempt integer NOT NULL DEFAULT 0,
  max_attempts integer NOT NULL DEFAULT 20,
  inserted_at timestamp NOT NULL DEFAULT timezone('UTC', now()),
  scheduled_at timestamp NOT NULL DEFAULT timezone('UTC', now()),
  attempted_at timestamp,
  completed_at timestamp,
  attempted_by text[],
  discarded_at timestamp,
  priority integer DEFAULT 0,
  tags text[] DEFAULT '{}'
);
CREATE INDEX oban_jobs_state_queue_priority_scheduled_at_id_index ON oban_jobs (state, queue, priority, scheduled_at, id);

-- name: seed
INSERT INTO oban_jobs (worker, args, scheduled_at)
SELECT 'Claimcheck.Worker', '{}', timezone('UTC', now()) - (%(jobs)s - g) * interval '1 microsecond'
FROM generate_series(1, %(jobs)s) g
RETURNING id;

-- name: remaining
SELECT count(*) FROM oban_jobs WHERE state <> 'completed';

-- name: claim
UPDATE "oban_jobs" AS o0
SET "state" = 'executing', "attempted_at" = timezone('UTC', now()), "attempted_by" = ARRAY[%(worker)s],
    "attempt" = o0."attempt" + 1
WHERE (o0."id" IN (
  SELECT so0."id" AS "id" FROM "oban_jobs" AS so0
  WHERE (so0."state" = 'available') AND (so0."queue" = 'default') AND (so0."attempt" < so0."max_attempts")
  ORDER BY so0."priority", so0."scheduled_at", so0."id"
  LIMIT %(batch)s FOR UPDATE SKIP LOCKED))
RETURNING o0.*;

-- name: complete
UPDATE "oban_jobs" SET "state" = 'completed', "completed_at" = timezone('UTC', now())
WHERE "id" = %(id)s;
