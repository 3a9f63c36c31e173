-- expected: safe
-- source: QueueClassic/queue_classic v3.1.0 (commit a61042cbe03be7d0a6efa4cca3ae25202e725cd2): sql/create_table.sql, sql/ddl.sql (lock_head), lib/queue_classic/queue.rb line 69 (SELECT * FROM lock_head($1, $2)) and lines 88-95 (delete)
-- summary: plpgsql lock_head: a random OFFSET among the first top_boundary unlocked jobs, SELECT ... FOR UPDATE NOWAIT in a loop that catches lock_not_available (55P03) and tries again, then UPDATE ... SET locked_at WHERE id = $1 AND locked_at IS NULL RETURNING *; the job is deleted when done
--
-- Translation: both files as written (the notify trigger included); queue 'default' and
-- top_boundary 9, queue_classic's default for lock_head(q_name). The worker's call and delete as
-- in queue.rb.

-- name: schema
do $$ begin

CREATE TABLE queue_classic_jobs (
  id bigserial PRIMARY KEY,
  q_name text not null check (length(q_name) > 0),
  method text not null check (length(method) > 0),
  args   text not null,
  locked_at timestamptz,
  locked_by integer,
  created_at timestamptz default now(),
  scheduled_at timestamptz default now()
);

-- If json type is available, use it for the args column.
perform * from pg_type where typname = 'json';
if found then
  alter table queue_classic_jobs alter column args type json using (args::json);
end if;

end $$ language plpgsql;

CREATE INDEX idx_qc_on_name_only_unlocked ON queue_classic_jobs (q_name, id) WHERE locked_at IS NULL;
CREATE INDEX idx_qc_on_scheduled_at_only_unlocked ON queue_classic_jobs (scheduled_at, id) WHERE locked_at IS NULL;

CREATE OR REPLACE FUNCTION lock_head(q_name varchar, top_boundary integer)
RETURNS SETOF queue_classic_jobs AS $$
DECLARE
  unlocked bigint;
  relative_top integer;
  job_count integer;
BEGIN
  -- The purpose is to release contention for the first spot in the table.
  -- The select count(*) is going to slow down dequeue performance but allow
  -- for more workers. Would love to see some optimization here...

  EXECUTE 'SELECT count(*) FROM '
    || '(SELECT * FROM queue_classic_jobs '
    || ' WHERE locked_at IS NULL'
    || ' AND q_name = '
    || quote_literal(q_name)
    || ' AND scheduled_at <= '
    || quote_literal(now())
    || ' LIMIT '
    || quote_literal(top_boundary)
    || ') limited'
  INTO job_count;

  SELECT TRUNC(random() * (top_boundary - 1))
  INTO relative_top;

  IF job_count < top_boundary THEN
    relative_top = 0;
  END IF;

  LOOP
    BEGIN
      EXECUTE 'SELECT id FROM queue_classic_jobs '
        || ' WHERE locked_at IS NULL'
        || ' AND q_name = '
        || quote_literal(q_name)
        || ' AND scheduled_at <= '
        || quote_literal(now())
        || ' ORDER BY id ASC'
        || ' LIMIT 1'
        || ' OFFSET ' || quote_literal(relative_top)
        || ' FOR UPDATE NOWAIT'
      INTO unlocked;
      EXIT;
    EXCEPTION
      WHEN lock_not_available THEN
        -- do nothing. loop again and hope we get a lock
    END;
  END LOOP;

  RETURN QUERY EXECUTE 'UPDATE queue_classic_jobs '
    || ' SET locked_at = (CURRENT_TIMESTAMP),'
    || ' locked_by = (select pg_backend_pid())'
    || ' WHERE id = $1'
    || ' AND locked_at is NULL'
    || ' RETURNING *'
  USING unlocked;

  RETURN;
END;
$$ LANGUAGE plpgsql;

CREATE OR REPLACE FUNCTION lock_head(tname varchar)
RETURNS SETOF queue_classic_jobs AS $$
BEGIN
  RETURN QUERY EXECUTE 'SELECT * FROM lock_head($1,10)' USING tname;
END;
$$ LANGUAGE plpgsql;

create function queue_classic_notify() returns trigger as $$ begin
  perform pg_notify(new.q_name, '');
  return null;
end $$ language plpgsql;

create trigger queue_classic_notify
after insert on queue_classic_jobs
for each row
execute procedure queue_classic_notify();

-- name: seed
INSERT INTO queue_classic_jobs (q_name, method, args, scheduled_at)
SELECT 'default', 'Claimcheck.job', '[]', now() - interval '1 second' FROM generate_series(1, %(jobs)s)
RETURNING id;

-- name: remaining
SELECT count(*) FROM queue_classic_jobs;

-- name: claim
SELECT * FROM lock_head('default', 9);

-- name: complete
DELETE FROM queue_classic_jobs where id = %(id)s;
