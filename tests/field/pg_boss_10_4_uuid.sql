-- expected: safe
-- source: timgit/pg-boss 10.4.0 (commit 80b9761954431aed15662fdf4b2bde12dd024102): src/plans.js lines 104-117 (job_state enum), 176-200 (job table, PRIMARY KEY (name, id)), 319-353 (indexes job_i1..job_i5), 506-541 (fetchNextJob), 543-557 (completeJobs)
-- summary: uuid keys, a table partitioned by queue name; fetch: CTE SELECT ... state < 'active' FOR UPDATE SKIP LOCKED, then UPDATE to active (retry_count + 1 when started before); complete: UPDATE ... WHERE id IN (...) AND state = 'active'
--
-- Translation: schema placeholder dropped; one partition for the queue 'claimcheck' (pg-boss
-- creates one per queue in createQueue); the standard policy (no singleton key). fetchNextJob as
-- the template renders it with priority ordering, start_after checked, batch %(batch)s,
-- baseJobColumns (id, name, data, expire_in) returned. completeJobs for one id.

-- name: schema
CREATE TYPE job_state AS ENUM ('created', 'retry', 'active', 'completed', 'cancelled', 'failed');
CREATE TABLE job (
  id uuid not null default gen_random_uuid(),
  name text not null,
  priority integer not null default(0),
  data jsonb,
  state job_state not null default('created'),
  retry_limit integer not null default(2),
  retry_count integer not null default(0),
  retry_delay integer not null default(0),
  retry_backoff boolean not null default false,
  start_after timestamp with time zone not null default now(),
  started_on timestamp with time zone,
  singleton_key text,
  singleton_on timestamp without time zone,
  expire_in interval not null default interval '15 minutes',
  created_on timestamp with time zone not null default now(),
  completed_on timestamp with time zone,
  keep_until timestamp with time zone NOT NULL default now() + interval '14 days',
  output jsonb,
  dead_letter text,
  policy text
) PARTITION BY LIST (name);
ALTER TABLE job ADD PRIMARY KEY (name, id);
CREATE TABLE job_claimcheck (LIKE job INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
ALTER TABLE job ATTACH PARTITION job_claimcheck FOR VALUES IN ('claimcheck');
CREATE UNIQUE INDEX job_i1 ON job (name, COALESCE(singleton_key, '')) WHERE state = 'created' AND policy = 'short';
CREATE UNIQUE INDEX job_i2 ON job (name, COALESCE(singleton_key, '')) WHERE state = 'active' AND policy = 'singleton';
CREATE UNIQUE INDEX job_i3 ON job (name, state, COALESCE(singleton_key, '')) WHERE state <= 'active' AND policy = 'stately';
CREATE UNIQUE INDEX job_i4 ON job (name, singleton_on, COALESCE(singleton_key, '')) WHERE state <> 'cancelled' AND singleton_on IS NOT NULL;
CREATE INDEX job_i5 ON job (name, start_after) INCLUDE (priority, created_on, id) WHERE state < 'active';

-- name: seed
INSERT INTO job (name, data, policy, start_after, created_on)
SELECT 'claimcheck', jsonb_build_object('n', g), 'standard', now() - interval '1 second',
       now() - (%(jobs)s - g) * interval '1 microsecond'
FROM generate_series(1, %(jobs)s) g
RETURNING id;

-- name: remaining
SELECT count(*) FROM job WHERE state < 'completed';

-- name: claim
WITH next as (
  SELECT id, singleton_key, policy
  FROM job
  WHERE name = 'claimcheck'
    AND state < 'active'
    AND start_after < now()
  ORDER BY priority desc, created_on, id
  LIMIT %(batch)s
  FOR UPDATE SKIP LOCKED
), grouped as (
  SELECT
    n.id,
    n.policy as grouped_policy,
    row_number() OVER (
      PARTITION BY CASE
        WHEN %(batch)s > 1 AND n.policy in ('singleton', 'stately') THEN n.singleton_key
        ELSE n.id::text
      END
    ) as row_number
  FROM next n
)
UPDATE job j SET
  state = 'active',
  started_on = now(),
  retry_count = CASE WHEN started_on IS NOT NULL THEN retry_count + 1 ELSE retry_count END
FROM grouped
WHERE name = 'claimcheck' AND j.id = grouped.id
  AND (
    (grouped.grouped_policy IN ('singleton', 'stately') AND grouped.row_number = 1)
    OR COALESCE(grouped.grouped_policy, '') NOT IN ('singleton', 'stately')
  )
RETURNING j.id, j.name, j.data, j.expire_in;

-- name: complete
WITH results AS (
  UPDATE job
  SET completed_on = now(),
    state = 'completed',
    output = NULL::jsonb
  WHERE name = 'claimcheck'
    AND id IN (SELECT UNNEST(ARRAY[%(id)s]::uuid[]))
    AND state = 'active'
  RETURNING *
)
SELECT COUNT(*) FROM results;
