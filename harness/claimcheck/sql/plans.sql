-- The plans' queries (claimcheck.plans), by name. They run in the run's schema.

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
-- Pauses once per statement of a session that sets claimcheck.pause_us (a timing condition's
-- workers; the coordinator sets nothing and never pauses), at the first row the statement reads
-- from a shadowed table: after the statement took its snapshot, before it locks that row. Its tiny
-- COST puts it first among the filters of a scan, ahead of a lock function such as
-- pg_try_advisory_xact_lock. Volatile, so it is evaluated per row and never folded away.
CREATE FUNCTION claimcheck_pause() RETURNS boolean LANGUAGE plpgsql VOLATILE COST 0.0001 AS $$
DECLARE
  pause text := current_setting('claimcheck.pause_us', true);
  this text;
BEGIN
  IF coalesce(pause, '') IN ('', '0') THEN
    RETURN true;
  END IF;
  this := statement_timestamp()::text;
  IF current_setting('claimcheck.paused_at', true) IS DISTINCT FROM this THEN
    PERFORM set_config('claimcheck.paused_at', this, false);
    PERFORM pg_sleep(pause::int / 1e6);
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
