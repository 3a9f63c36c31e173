-- expected: safe
-- source: graphile/worker v0.17.3 (commit ca2cef1c8c6bf9d9c818d19f194f596971c212df): src/sql/getJobs.ts (batchGetJobs, queue strategy 2, database time), src/sql/completeJobs.ts (job without a queue); tables from sql/000011.sql lines 35-81 renamed by sql/000016.sql
-- summary: one statement: jobs (and their queue rows) locked FOR UPDATE SKIP LOCKED where is_available (a stored generated column), then attempts + 1 and locked_by/locked_at stamped; completion deletes the job
--
-- Translation: the tables as created (schema placeholder dropped: the run's schema is on the
-- search_path), one task row for the task identifier; jobs seeded without a queue (graphile's
-- default). `%(batch)s` is the template's batchSize, `%(worker)s` its pool id ($1).

-- name: schema
create table _private_job_queues (
  id int primary key generated always as identity,
  queue_name text not null unique check (length(queue_name) <= 128),
  locked_at timestamptz,
  locked_by text,
  is_available boolean generated always as ((locked_at is null)) stored not null
);
create table _private_tasks (
  id int primary key generated always as identity,
  identifier text not null unique check (length(identifier) <= 128)
);
create table _private_jobs (
  id bigint primary key generated always as identity,
  job_queue_id int null,
  task_id int not null,
  payload json default '{}'::json not null,
  priority smallint default 0 not null,
  run_at timestamptz default now() not null,
  attempts smallint default 0 not null,
  max_attempts smallint default 25 not null constraint jobs_max_attempts_check check (max_attempts >= 1),
  last_error text,
  created_at timestamptz default now() not null,
  updated_at timestamptz default now() not null,
  key text unique constraint jobs_key_check check (length(key) > 0 and length(key) <= 512),
  locked_at timestamptz,
  locked_by text,
  revision integer default 0 not null,
  flags jsonb,
  is_available boolean generated always as (((locked_at is null) and (attempts < max_attempts))) stored not null
);
create index jobs_main_index on _private_jobs using btree (priority, run_at) include (id, task_id, job_queue_id) where (is_available = true);
create index jobs_no_queue_index on _private_jobs using btree (priority, run_at) include (id, task_id) where (is_available = true and job_queue_id is null);
insert into _private_tasks (identifier) values ('claimcheck_task');

-- name: seed
insert into _private_jobs (task_id, run_at)
select 1, now() - (%(jobs)s - g) * interval '1 microsecond' from generate_series(1, %(jobs)s) g
returning id;

-- name: remaining
select count(*) from _private_jobs;

-- name: claim
with j as (
  select jobs.job_queue_id, jobs.priority, jobs.run_at, jobs.id
    from _private_jobs as jobs
    where jobs.is_available = true
    and run_at <= now()
    and task_id = any(array[1]::int[])
    and (
      jobs.job_queue_id is null
      or
      jobs.job_queue_id in (
        select id
        from _private_job_queues as job_queues
        where job_queues.is_available = true
        for update
        skip locked
      )
    )
    order by priority asc, run_at asc
    limit %(batch)s
    for update
    skip locked
),
q as (
  update _private_job_queues as job_queues
    set
      locked_by = %(worker)s::text,
      locked_at = now()
    from j
    where job_queues.id = j.job_queue_id
)
  update _private_jobs as jobs
    set
      attempts = jobs.attempts + 1,
      locked_by = %(worker)s::text,
      locked_at = now()
    from j
    where jobs.id = j.id
    returning jobs.id, jobs.attempts, jobs.max_attempts;

-- name: complete
delete from _private_jobs as jobs where id = %(id)s::bigint;
