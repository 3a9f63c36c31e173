-- expected: safe
-- source: sorentwo/oban v2.18.2 (commit 65d75e0b94c5ca99538cb4a1bc45df2d88e638f0): lib/oban/engines/basic.ex lines 86-121 (fetch_jobs), 184-216 (complete_job); table from lib/oban/migrations/postgres/v01.ex and v08.ex
-- summary: in a transaction: WITH subset AS (SELECT id ... state = 'available' ... LIMIT demand FOR UPDATE SKIP LOCKED) UPDATE ... SET state = 'executing', attempt + 1 FROM subset WHERE id = subset.id AND attempt < max_attempts RETURNING *; completion by id
--
-- Translation: V01's enum and table with V08's priority column and fetch index; the Ecto query
-- rendered as SQL (queue 'default', demand %(batch)s, attempted_by the worker); it returns the
-- whole row, so attempt and max_attempts are checked on every claim.
-- The fix of oban_2_14_in_subquery.sql, from v2.15.0 (commit 08d9f2e236c2b2919c02384acc29bab09c88dcbb,
-- the same CTE; 2.18 adds the outer `attempt < max_attempts` and the node's uuid): the CTE is not
-- written MATERIALIZED, but PostgreSQL never folds a CTE that locks rows into the outer query, so
-- it runs once: a CTE Scan under every plan tests/benchmarks/field_plans.py tried (fresh
-- statistics, a queue analyzed at 1 job and filled to 41, hashing and sorting off), 2 rows for 2.

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
WITH "subset" AS (
  SELECT so0."id" AS "id" FROM "oban_jobs" AS so0
  WHERE (so0."state" = 'available') AND (so0."queue" = 'default')
  ORDER BY so0."priority", so0."scheduled_at", so0."id"
  LIMIT %(batch)s FOR UPDATE SKIP LOCKED)
UPDATE "oban_jobs" AS o0
SET "state" = 'executing', "attempted_at" = timezone('UTC', now()), "attempted_by" = ARRAY[%(worker)s],
    "attempt" = o0."attempt" + 1
FROM "subset" AS f1
WHERE (o0."id" = f1."id") AND (o0."attempt" < o0."max_attempts")
RETURNING o0.*;

-- name: complete
UPDATE "oban_jobs" SET "state" = 'completed', "completed_at" = timezone('UTC', now())
WHERE "id" = %(id)s;
