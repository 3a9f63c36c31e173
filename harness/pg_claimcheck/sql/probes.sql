-- The probes' own queries, by name (harness/probes/). Like queries.sql, every query runs
-- with search_path set to the run's schema, so `jobs` is always the run's table.

-- name: autovacuum_off
-- The vacuum probe compares VACUUM's figures between modes; autovacuum running on its own
-- clock in between would make them autovacuum's, not the workload's.
ALTER TABLE jobs SET (autovacuum_enabled = off);

-- name: force_stats_flush
-- PostgreSQL 15+: this backend's pending statistics go to shared memory when it next goes
-- idle, which is right after this statement. Without it n_dead_tup lags by up to a second.
SELECT pg_stat_force_next_flush();

-- name: clear_stats_snapshot
SELECT pg_stat_clear_snapshot();

-- name: table_stats
-- n_dead_tup is the statistics system's estimate; pg_table_size counts the heap, its TOAST
-- table and their free-space and visibility maps (not the indexes).
SELECT coalesce(s.n_dead_tup, 0) AS n_dead_tup,
       coalesce(s.n_live_tup, 0) AS n_live_tup,
       pg_table_size(c.oid)       AS table_bytes
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
WHERE n.nspname = current_schema() AND c.relname = 'jobs';

-- name: holder_horizon
-- What one session holds back: its snapshot's xmin (a REPEATABLE READ snapshot, or a running
-- statement's) and its own transaction id (a transaction that has written). Either stops
-- VACUUM from removing row versions that died after it.
SELECT age(backend_xmin) AS xmin_age,
       age(backend_xid)  AS xid_age,
       state
FROM pg_stat_activity
WHERE pid = %(pid)s;

-- name: xid_marker
-- The current transaction id (32 bits, as backend_xmin shows it), taken as the workload ends:
-- a session whose horizon is older than this may hold back some of the workload's dead rows.
SELECT mod(pg_current_xact_id()::text::bigint, 4294967296)::text;

-- name: marker_age
SELECT age(%(marker)s::xid);

-- name: other_horizons
-- Sessions outside this probe whose horizon is older than `marker` (same database), and prepared transactions or replication slots anywhere: a baseline that keeps
-- tuples on a shared server is explained by these, not by the probe.
SELECT (SELECT count(*) FROM pg_stat_activity
        WHERE datname = current_database() AND pid <> ALL(%(pids)s) AND pid <> pg_backend_pid()
          AND greatest(age(backend_xmin), age(backend_xid)) >= age(%(marker)s::xid)) AS sessions,
       (SELECT max(greatest(age(backend_xmin), age(backend_xid))) FROM pg_stat_activity
        WHERE datname = current_database() AND pid <> ALL(%(pids)s) AND pid <> pg_backend_pid()
          AND greatest(age(backend_xmin), age(backend_xid)) >= age(%(marker)s::xid)) AS oldest_age,
       (SELECT count(*) FROM pg_prepared_xacts) AS prepared,
       (SELECT count(*) FROM pg_replication_slots WHERE xmin IS NOT NULL OR catalog_xmin IS NOT NULL) AS slots;

-- name: vacuum_verbose
-- {jobs} is the run's table, schema-qualified: VACUUM runs alone, outside any transaction, so through
-- a pooler it cannot share a message with the statement that sets the search path.
VACUUM (VERBOSE) {jobs};

-- name: vacuum_plain
VACUUM {jobs};

-- name: read_one
-- A holder's first read: in REPEATABLE READ it takes the transaction's snapshot.
SELECT count(*) FROM jobs WHERE status = 'queued';

-- name: enqueue_jobs
INSERT INTO jobs (payload, queue)
SELECT jsonb_build_object('n', g), %(queue)s FROM generate_series(1, %(jobs)s) AS g;

-- name: enqueue_one
INSERT INTO jobs (payload, queue) VALUES (jsonb_build_object('probe', %(n)s), %(queue)s) RETURNING id;

-- name: archive_batch
-- Seed 003's archive step, one batch: finished jobs out of the hot table.
DELETE FROM jobs
WHERE id IN (
    SELECT id FROM jobs
    WHERE status = 'done'
    LIMIT %(batch)s
);

-- name: notify_function
-- Seed 003's trigger, with the channel given as the trigger's argument so each run listens on
-- a channel of its own. Created in the run's schema (the caller qualifies the name).
CREATE OR REPLACE FUNCTION {function}() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(TG_ARGV[0], NEW.queue);
    RETURN NULL;
END;
$$;

-- name: notify_trigger
CREATE TRIGGER jobs_notify
AFTER INSERT ON jobs
FOR EACH ROW EXECUTE FUNCTION {function}({channel});

-- name: notify
SELECT pg_notify(%(channel)s, %(payload)s);
