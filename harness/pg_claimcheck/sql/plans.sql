-- The plans' queries (pg_claimcheck.plans), by name. They run in the run's schema.

-- name: schema_tables
-- Every table of the run's schema (a file's own tables, or our jobs table), and whether it holds
-- rows itself: a partitioned table ('p') takes no storage options, its partitions do.
SELECT n.nspname, c.relname, c.relkind = 'r' AS stored
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')
ORDER BY c.relname;

-- name: autovacuum_off
-- Off for the table: autovacuum would otherwise analyze it once the seed commits and end the
-- stale statistics the condition is about (autoanalyze is part of autovacuum).
ALTER TABLE {table} SET (autovacuum_enabled = off);

-- name: shadowed_tables
-- The tables a timing condition puts a view in front of: every table of the run's schema that is
-- not a partition (a partition is reached through its parent, which is shadowed).
SELECT c.relname
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') AND NOT c.relispartition
ORDER BY c.relname;

-- name: pause_function
-- Pauses a statement of a session that sets claimcheck.pause_us (a timing condition's workers; the
-- coordinator sets nothing and never pauses) once, at the first row it reads from a shadowed table:
-- after the statement took its snapshot, before it locks that row. Only the claim's statements
-- pause: those whose text holds one of claimcheck.pause_on's marks (pieces of the pick's and the
-- claim's text, separated by chr(31); none: every statement), so a completion does not, and claims
-- stay a large share of a worker's time. The pause is 0.5 to 1.5 times pause_us, at random: two
-- workers with equal cycles would otherwise keep the same phase for the whole run. Its tiny COST
-- puts it first among a scan's filters, ahead of a lock function such as pg_try_advisory_xact_lock;
-- volatile, so it is evaluated per row and never folded away.
CREATE FUNCTION claimcheck_pause() RETURNS boolean LANGUAGE plpgsql VOLATILE COST 0.0001 AS $$
DECLARE
  pause text := current_setting('claimcheck.pause_us', true);
  marks text := coalesce(current_setting('claimcheck.pause_on', true), '');
  this text;
BEGIN
  IF coalesce(pause, '') IN ('', '0') THEN
    RETURN true;
  END IF;
  this := statement_timestamp()::text;
  IF current_setting('claimcheck.paused_at', true) IS NOT DISTINCT FROM this THEN
    RETURN true;  -- this statement was decided at its first row
  END IF;
  PERFORM set_config('claimcheck.paused_at', this, false);
  IF marks = '' OR EXISTS (SELECT FROM unnest(string_to_array(marks, chr(31))) AS mark
                           WHERE strpos(current_query(), mark) > 0) THEN
    PERFORM pg_sleep(pause::int * (0.5 + random()) / 1e6);
  END IF;
  RETURN true;
END
$$;

-- name: shadow_table
-- The table renamed, and a view of its name in front of it: every statement that names the table
-- (the file's own text, its functions) reads it through the pause. Simple enough to be updatable.
ALTER TABLE {table} RENAME TO {base};
CREATE VIEW {table} AS SELECT * FROM {base} WHERE claimcheck_pause();

-- name: unshadow_table
DROP VIEW {table};
ALTER TABLE {base} RENAME TO {name};

-- name: drop_pause_function
DROP FUNCTION IF EXISTS claimcheck_pause();

-- name: seed_finished_jobs
-- The plan guard's history: many finished jobs, older than the ready ones.
INSERT INTO jobs (payload, status, run_at, attempts)
SELECT jsonb_build_object('n', g), 'done', now() - interval '1 day' + g * interval '1 millisecond', 1
FROM generate_series(1, %(jobs)s) AS g;
