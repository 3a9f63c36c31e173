-- expected: safe
-- source: graphile/worker v0.1.0 (commit 1892f8a016c503b43ab23d843533d10b9cf7120a): sql/000001.sql (tables, triggers, add_job, get_job, complete_job)
-- summary: two tables: jobs and job_queues; get_job (plpgsql) locks the job's queue row FOR UPDATE OF job_queues SKIP LOCKED, stamps locked_by/locked_at (lease: 4 hours), bumps attempts; complete_job deletes the job and unlocks its queue
--
-- Translation: sql/000001.sql as written, without the graphile_worker schema qualifier (the run's
-- schema is on the search_path) and with gen_random_uuid() for public.gen_random_uuid() (core
-- since PostgreSQL 13). The worker calls get_job and complete_job as the JS worker does
-- (`select * from get_job($1, $2)`); `WHERE id IS NOT NULL` is the worker's own check for the
-- all-NULL row get_job returns when there is nothing to do. worker_id must be >= 10 characters.

-- name: schema
create table job_queues (
  queue_name text not null primary key,
  job_count int not null,
  locked_at timestamptz,
  locked_by text
);
alter table job_queues enable row level security;

create table jobs (
  id bigserial primary key,
  queue_name text default (gen_random_uuid())::text not null,
  task_identifier text not null,
  payload json default '{}'::json not null,
  priority int default 0 not null,
  run_at timestamptz default now() not null,
  attempts int default 0 not null,
  max_attempts int default 25 not null,
  last_error text,
  created_at timestamp with time zone not null default now(),
  updated_at timestamp with time zone not null default now()
);
alter table jobs enable row level security;

create index on jobs (priority, run_at, id);

create function tg__update_timestamp() returns trigger as $$
begin
  new.updated_at = greatest(now(), old.updated_at + interval '1 millisecond');
  return new;
end;
$$ language plpgsql;
create trigger _100_timestamps before update on jobs for each row execute procedure tg__update_timestamp();

create function jobs__decrease_job_queue_count() returns trigger as $$
declare
  v_new_job_count int;
begin
  update job_queues
    set job_count = job_queues.job_count - 1
    where queue_name = old.queue_name
    returning job_count into v_new_job_count;

  if v_new_job_count <= 0 then
    delete from job_queues where queue_name = old.queue_name and job_count <= 0;
  end if;

  return old;
end;
$$ language plpgsql;
create function jobs__increase_job_queue_count() returns trigger as $$
begin
  insert into job_queues(queue_name, job_count)
    values(new.queue_name, 1)
    on conflict (queue_name)
    do update
    set job_count = job_queues.job_count + 1;

  return new;
end;
$$ language plpgsql;
create trigger _500_increase_job_queue_count after insert on jobs for each row execute procedure jobs__increase_job_queue_count();
create trigger _500_decrease_job_queue_count after delete on jobs for each row execute procedure jobs__decrease_job_queue_count();
create trigger _500_increase_job_queue_count_update after update of queue_name on jobs for each row execute procedure jobs__increase_job_queue_count();
create trigger _500_decrease_job_queue_count_update after update of queue_name on jobs for each row execute procedure jobs__decrease_job_queue_count();

create function add_job(identifier text, payload json = '{}', queue_name text = gen_random_uuid()::text, run_at timestamptz = now(), max_attempts int = 25) returns jobs as $$
  insert into jobs(task_identifier, payload, queue_name, run_at, max_attempts) values(identifier, payload, queue_name, run_at, max_attempts) returning *;
$$ language sql;

create function get_job(worker_id text, task_identifiers text[] = null, job_expiry interval = interval '4 hours') returns jobs as $$
declare
  v_job_id bigint;
  v_queue_name text;
  v_default_job_max_attempts text = '25';
  v_row jobs;
begin
  if worker_id is null or length(worker_id) < 10 then
    raise exception 'invalid worker id';
  end if;

  select job_queues.queue_name, jobs.id into v_queue_name, v_job_id
    from jobs
    inner join job_queues using (queue_name)
    where (locked_at is null or locked_at < (now() - job_expiry))
    and run_at <= now()
    and attempts < max_attempts
    and (task_identifiers is null or task_identifier = any(task_identifiers))
    order by priority asc, run_at asc, id asc
    limit 1
    for update of job_queues
    skip locked;

  if v_queue_name is null then
    return null;
  end if;

  update job_queues
    set
      locked_by = worker_id,
      locked_at = now()
    where job_queues.queue_name = v_queue_name;

  update jobs
    set attempts = attempts + 1
    where id = v_job_id
    returning * into v_row;

  return v_row;
end;
$$ language plpgsql;

create function complete_job(worker_id text, job_id bigint) returns jobs as $$
declare
  v_row jobs;
begin
  delete from jobs
    where id = job_id
    returning * into v_row;

  update job_queues
    set locked_by = null, locked_at = null
    where queue_name = v_row.queue_name and locked_by = worker_id;

  return v_row;
end;
$$ language plpgsql;

-- name: seed
SELECT (add_job('claimcheck_task')).id FROM generate_series(1, %(jobs)s);

-- name: remaining
SELECT count(*) FROM jobs;

-- name: claim
SELECT id, attempts, max_attempts FROM get_job('claimcheck-' || %(worker)s) WHERE id IS NOT NULL;

-- name: complete
SELECT id FROM complete_job('claimcheck-' || %(worker)s, %(id)s) WHERE id IS NOT NULL;
