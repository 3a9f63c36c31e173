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

-- name: seed_finished_jobs
-- The plan guard's history: many finished jobs, older than the ready ones.
INSERT INTO jobs (payload, status, run_at, attempts)
SELECT jsonb_build_object('n', g), 'done', now() - interval '1 day' + g * interval '1 millisecond', 1
FROM generate_series(1, %(jobs)s) AS g;
