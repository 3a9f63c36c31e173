-- The harness's own queries, by name. Strategies' SQL lives in scenarios/*.sql.
-- Every query runs with search_path set to the run's schema, so `jobs` is always ours.

-- name: create_jobs
-- The table from seed 003. The primary key and the partial index are added after
-- seeding (see add_primary_key, create_ready_index): building them once is faster
-- than maintaining them row by row. Ids start at the run's own key range ({first_key},
-- composed in by claimcheck.schema), so advisory-lock keys never meet another run's.
CREATE TABLE jobs (
    id           bigint      GENERATED ALWAYS AS IDENTITY (START WITH {first_key}),
    queue        text        NOT NULL DEFAULT 'default',
    payload      jsonb       NOT NULL,
    status       text        NOT NULL DEFAULT 'queued'
                 CHECK (status IN ('queued', 'running', 'done', 'failed')),
    run_at       timestamptz NOT NULL DEFAULT now(),
    attempts     int         NOT NULL DEFAULT 0,
    max_attempts int         NOT NULL DEFAULT 5,
    locked_until timestamptz,
    last_error   text,
    created_at   timestamptz NOT NULL DEFAULT now()
);

-- name: seed_jobs
-- One set-based statement. run_at rises by a microsecond per id so that
-- "ORDER BY run_at" and "ORDER BY id" agree, as in the seeds' demonstrations.
INSERT INTO jobs (payload, run_at)
SELECT jsonb_build_object('n', g), now() - (%(jobs)s - g) * interval '1 microsecond'
FROM generate_series(1, %(jobs)s) AS g;

-- name: enqueue_job
-- The producer's default `enqueue` (see pg_claimcheck.engine.producer): one job with the key it was
-- given (reserved after the seeded ones, so an explicit id past the identity's own values).
INSERT INTO jobs (id, payload) OVERRIDING SYSTEM VALUE
VALUES (%(key)s, jsonb_build_object('n', %(key)s))
RETURNING id;

-- name: enqueue_job_notify
-- enqueue_job under --wakeup notify (see pg_claimcheck.engine.idle): the notification goes in the job's own
-- transaction, so a listener woken by it finds the job committed. One statement, one round trip.
WITH job AS (
    INSERT INTO jobs (id, payload) OVERRIDING SYSTEM VALUE
    VALUES (%(key)s, jsonb_build_object('n', %(key)s))
    RETURNING id
)
SELECT id FROM job, pg_notify(%(channel)s, '') AS notified;

-- name: add_primary_key
ALTER TABLE jobs ADD PRIMARY KEY (id);

-- name: create_ready_index
CREATE INDEX jobs_ready_idx ON jobs (queue, run_at) WHERE status = 'queued';

-- name: analyze_jobs
ANALYZE jobs;

-- name: seeded_range
SELECT min(id), max(id), count(*) FROM jobs;

-- name: queued_remaining
-- A worker whose claim came back empty asks this before it stops: an empty claim
-- with queued jobs left (locked by others, or a missed snapshot) is not the end.
SELECT EXISTS (SELECT 1 FROM jobs WHERE status = 'queued');

-- name: table_outcome
SELECT count(*) FILTER (WHERE status = 'done')    AS done,
       count(*) FILTER (WHERE status = 'queued')  AS queued,
       count(*) FILTER (WHERE status = 'running') AS running,
       count(*) FILTER (WHERE status = 'failed')  AS failed,
       coalesce(max(attempts), 0)                 AS max_attempts
FROM jobs;

-- name: sample_activity
-- One sample for the lock-wait sampler: the wait of every busy backend of this run.
SELECT wait_event_type, wait_event
FROM pg_stat_activity
WHERE application_name LIKE %(app_prefix)s AND application_name ~ '/w[0-9]+$'
  AND state <> 'idle'
  AND pid <> pg_backend_pid();

-- name: sample_queue
-- One sample for the queue sampler of a rate run (pg_claimcheck.engine.sampler.QueueSampler): jobs
-- waiting to be claimed and claimed but not finished (one scan: in lock mode a claimed job's
-- 'running' is not committed yet, so it shows as queued until it is done), the dead tuples and
-- vacuums the statistics system counts (each backend reports its own within about a second), and
-- the table's size with its indexes and TOAST. Fields: engine.sampler.QUEUE_FIELDS.
SELECT q.queued, q.running, coalesce(s.n_dead_tup, 0), pg_total_relation_size('jobs'::regclass),
       coalesce(s.vacuum_count + s.autovacuum_count, 0)
FROM (SELECT count(*) FILTER (WHERE status = 'queued')  AS queued,
             count(*) FILTER (WHERE status = 'running') AS running
      FROM jobs) AS q
LEFT JOIN pg_stat_user_tables AS s ON s.relid = 'jobs'::regclass;

-- name: stuck_worker_backends
-- Asked once, when no job progresses: the run's worker backends in one state (a statement, or a
-- transaction left open) for at least %(at_least_s)s, longest first.
SELECT application_name, pid, state, wait_event_type, wait_event,
       extract(epoch FROM clock_timestamp() - state_change)::float8 AS for_s, left(query, 80) AS query
FROM pg_stat_activity
WHERE application_name LIKE %(app_prefix)s AND application_name ~ '/w[0-9]+$'
  AND state <> 'idle'
  AND pid <> pg_backend_pid()
  AND clock_timestamp() - state_change >= make_interval(secs => %(at_least_s)s)
ORDER BY state_change;

-- name: busy_worker_backends
-- Worker backends inside a transaction, the ones a terminate fault should hit mid-transaction.
SELECT pid, application_name, state FROM pg_stat_activity
WHERE application_name LIKE %(app_prefix)s AND application_name ~ '/w[0-9]+$'
  AND (state = 'idle in transaction' OR state = 'active' AND xact_start IS NOT NULL)
  AND pid <> pg_backend_pid()
ORDER BY state = 'idle in transaction' DESC, random();

-- name: any_worker_backend
SELECT pid, application_name, state FROM pg_stat_activity
WHERE application_name LIKE %(app_prefix)s AND application_name ~ '/w[0-9]+$' AND pid <> pg_backend_pid()
ORDER BY random();

-- name: terminate_backend
SELECT pg_terminate_backend(%(pid)s);

-- name: connection_headroom
-- How many more connections this role may open here: the server's room, the role's and the
-- database's limits. PostgreSQL hides backend_type (and most columns) of other roles' sessions
-- from a role without pg_read_all_stats, but not their datid: a backend in a database is a client
-- (or a parallel or autovacuum worker, briefly: counted, the safe side).
WITH seen AS (
    SELECT a.datid, a.usesysid
    FROM pg_stat_activity a
    WHERE a.backend_type = 'client backend' OR (a.backend_type IS NULL AND a.datid IS NOT NULL)
)
SELECT least(
    current_setting('max_connections')::int
        - current_setting('superuser_reserved_connections')::int
        - coalesce(nullif(current_setting('reserved_connections', true), '')::int, 0)
        - (SELECT count(*) FROM seen),
    (SELECT CASE WHEN r.rolconnlimit >= 0
                 THEN r.rolconnlimit - (SELECT count(*) FROM seen WHERE usesysid = r.oid) END
     FROM pg_roles r WHERE r.rolname = current_user),
    (SELECT CASE WHEN d.datconnlimit >= 0
                 THEN d.datconnlimit - (SELECT count(*) FROM seen WHERE datid = d.oid) END
     FROM pg_database d WHERE d.datname = current_database()));

-- name: unfinished_remaining
-- The drain check when jobs can come back (failures, reaper, faults): a job queued for a
-- later retry, or running under a lease that may expire, is not finished yet.
SELECT EXISTS (SELECT 1 FROM jobs WHERE status IN ('queued', 'running'));

-- name: job_state
SELECT status, attempts, last_error FROM jobs WHERE id = %(id)s;

-- name: reap_expired
-- The seed's reaper: expired leases go back to the queue, or fail for good at max_attempts.
-- It returns the attempt it released, so the ledger knows which claim ended here.
UPDATE jobs
SET status       = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'queued' END,
    locked_until = NULL,
    last_error   = coalesce(last_error, 'lease expired')
WHERE status = 'running' AND locked_until < now()
RETURNING id, attempts, status;

-- name: lifecycle_outcome
SELECT count(*) FILTER (WHERE status IN ('queued', 'running')) AS unfinished,
       count(*) FILTER (WHERE attempts > max_attempts)         AS over_max_attempts,
       coalesce(sum(attempts), 0)                              AS attempts_total
FROM jobs;

-- name: jobs_state
SELECT id, status, attempts FROM jobs WHERE id = ANY(%(ids)s);

-- name: finished_among
SELECT count(*) FROM jobs WHERE id = ANY(%(ids)s) AND status IN ('done', 'failed');

-- name: schema_comment
-- A run's owner record (see claimcheck.ownership), written as its schema's comment.
SELECT obj_description(%(schema)s::regnamespace, 'pg_namespace');

-- name: leftover_schemas
-- Schemas of claimcheck runs, with the owner record each run writes as the schema's comment.
SELECT nspname, obj_description(oid, 'pg_namespace') FROM pg_namespace
WHERE nspname LIKE %(pattern)s AND nspname <> %(ours)s;

-- name: leftover_databases
-- Databases of claimcheck library runs, with the owner record each writes as the database's comment.
SELECT datname, shobj_description(oid, 'pg_database') FROM pg_database
WHERE datname LIKE %(pattern)s AND datname <> %(ours)s;

-- name: run_backends
-- Connections of one run (its application_name pattern), other than this one.
SELECT pid, application_name, state FROM pg_stat_activity
WHERE application_name LIKE %(app_pattern)s AND pid <> pg_backend_pid();

-- name: terminate_run_backends
-- Cleanup: end every connection of this run still open (an interrupted statement, a step still
-- running), so nothing of the run keeps running and DROP SCHEMA does not wait on its locks.
SELECT pg_terminate_backend(pid) FROM pg_stat_activity
WHERE application_name LIKE %(app_pattern)s AND pid <> pg_backend_pid();

-- name: claimed_among
-- Jobs the table shows claimed (taken from the queue, or attempted): after a Locust worker process
-- died, those of them no surviving record names were claimed by its users.
SELECT count(*) FROM jobs WHERE id = ANY(%(ids)s) AND (status <> 'queued' OR attempts > 0);

-- name: connected_applications
-- Which of these claimers still have a connection: the Locust master's witness that a worker
-- process whose heartbeat stopped is really gone.
SELECT application_name FROM pg_stat_activity WHERE application_name = ANY(%(names)s);

-- name: server_clock
-- The server's clock right after a claim that returns its lease's end (lease_until): the
-- ledger compares leases with server time only. Seconds since the epoch.
SELECT extract(epoch FROM clock_timestamp())::float8;

-- name: release_session_locks
-- Between interleaving permutations: session advisory locks outlive a ROLLBACK, and a spec's
-- steps may take them (the que / good_job family); every permutation starts with none.
SELECT pg_advisory_unlock_all();

-- name: still_queued_among
-- After a stalled run: jobs no worker ever claimed that the table shows still queued, never taken.
-- They wait in the queue (a liveness failure), not lost (see pg_claimcheck.verdict.liveness).
SELECT count(*) FROM jobs WHERE id = ANY(%(ids)s) AND status = 'queued' AND attempts = 0;

-- name: waiting_retries
-- Jobs queued for a retry that is not due yet (run_at in the future, requeued by `fail` or the
-- reaper), and the seconds until the first of them is due.
SELECT count(*), coalesce(extract(epoch FROM min(run_at) - now()), 0)::float8
FROM jobs WHERE status = 'queued' AND run_at > now();

-- name: session_setting
SELECT current_setting(%(name)s, true);

-- name: status_counts
-- The table after a run, as seed 003 prints it: `status | count | max_attempts`.
SELECT status, count(*), coalesce(max(attempts), 0) FROM jobs GROUP BY status ORDER BY status;

-- name: idle_sample
-- `claimcheck idle`: one look of seed 003's activity monitor at this run's own sessions (its
-- application_name prefix; the sampler itself left out), autovacuum workers on the run's own tables
-- (its schema in their query, or its database), and the server's replication connections, counted only.
SELECT t.at, s.kind, s.pid, s.application_name, s.state, s.state_change, s.backend_start, s.query
FROM (SELECT clock_timestamp() AS at) AS t
LEFT JOIN (
    SELECT 'session' AS kind, pid, application_name, coalesce(state, '') AS state, state_change, backend_start,
           left(query, 1024) AS query
    FROM pg_stat_activity
    WHERE application_name LIKE %(pattern)s AND pid <> pg_backend_pid() AND backend_type = 'client backend'
    UNION ALL
    SELECT 'autovacuum', pid, '', coalesce(state, ''), state_change, backend_start, left(query, 1024)
    FROM pg_stat_activity
    WHERE backend_type = 'autovacuum worker'
      AND (datname = %(database)s OR strpos(query, %(schema_dot)s) > 0)
    UNION ALL
    SELECT 'replication', NULL, '', coalesce(state, ''), NULL, NULL, ''
    FROM pg_stat_activity
    WHERE backend_type = 'walsender' AND state = 'active'
) AS s ON true;

-- name: idle_suspend
-- A simulated suspend: close the run's own sessions of the roles given, as a suspend closes every
-- connection (the sampler and the coordinator, claimcheck's own, are not the design's and stay).
SELECT pid, pg_terminate_backend(pid)
FROM pg_stat_activity
WHERE application_name LIKE %(pattern)s AND pid <> pg_backend_pid() AND application_name = ANY(%(names)s);
