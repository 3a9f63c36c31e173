-- expected: safe
-- isolation: repeatable read
-- source: hasura/graphql-engine (commit 019a69cb66179896094551e01f956bfcaf8a8bce): server/src-lib/Hasura/Events/Lib.hs (pollEvents: Q.runTx pool (Q.RepeatableRead, Just Q.ReadWrite) fetchEvents; fetchEvents; insertInvocation, markDelivered, unlockEvent); the event_log columns from fetchEvents' statements (the initialise.sql of that commit is not in the search tools)
-- summary: at REPEATABLE READ: UPDATE hdb_catalog.event_log SET locked = 't' WHERE id IN (SELECT l.id ... JOIN event_triggers ... delivered = 'f' AND error = 'f' AND locked = 'f' AND next_retry_at due LIMIT 100) RETURNING id, ...; no row locks: concurrent pollers of the same events fail with 40001 and poll again
--
-- Translation: the schema hdb_catalog as the run's schema (names unqualified); event_log and
-- event_triggers with the columns the statements use (text ids from gen_random_uuid(), as
-- Hasura's catalog makes them), one trigger (a seed run again adds events to it), %(jobs)s events. The fetch as written: its own LIMIT
-- 100, not --batch, which claimcheck reads from the text (pg_claimcheck.contract.limit: before, a
-- plain `check` called every claim of 100 rows an over-claim against --batch's default 10). The
-- webhook's success as one `complete` section: insertInvocation (the invocation row and tries +
-- 1), markDelivered, then unlockEvent (Hasura runs the last in a transaction of its own). The
-- subquery takes no row locks, so a rescan of it under a nested loop returns the same rows again
-- (the statement's snapshot does not see its own updates): no over-claim whatever the plan; a
-- poller racing another for the same rows gets 40001 at REPEATABLE READ, retried by claimcheck
-- as Hasura's poll loop polls again a second later.

-- name: schema
CREATE TABLE event_triggers (
  id TEXT DEFAULT gen_random_uuid() PRIMARY KEY,
  name TEXT UNIQUE NOT NULL,
  type TEXT NOT NULL,
  schema_name TEXT NOT NULL,
  table_name TEXT NOT NULL,
  definition JSON,
  query TEXT,
  webhook TEXT NOT NULL,
  num_retries INTEGER DEFAULT 0,
  retry_interval INTEGER DEFAULT 10,
  comment TEXT
);
CREATE TABLE event_log (
  id TEXT DEFAULT gen_random_uuid() PRIMARY KEY,
  schema_name TEXT NOT NULL,
  table_name TEXT NOT NULL,
  trigger_id TEXT NOT NULL,
  trigger_name TEXT NOT NULL,
  payload JSONB NOT NULL,
  delivered BOOLEAN NOT NULL DEFAULT FALSE,
  error BOOLEAN NOT NULL DEFAULT FALSE,
  tries INTEGER NOT NULL DEFAULT 0,
  created_at TIMESTAMP DEFAULT NOW(),
  locked BOOLEAN NOT NULL DEFAULT FALSE,
  next_retry_at TIMESTAMP
);
CREATE INDEX ON event_log (trigger_id);
CREATE TABLE event_invocation_logs (
  id TEXT DEFAULT gen_random_uuid() PRIMARY KEY,
  event_id TEXT,
  status INTEGER,
  request JSON,
  response JSON,
  created_at TIMESTAMP DEFAULT NOW(),
  FOREIGN KEY (event_id) REFERENCES event_log (id)
);
CREATE INDEX ON event_invocation_logs (event_id);

-- name: seed
INSERT INTO event_triggers (name, type, schema_name, table_name, webhook)
VALUES ('claimcheck', 'table', 'public', 'orders', 'http://localhost/hook') ON CONFLICT (name) DO NOTHING;
INSERT INTO event_log (schema_name, table_name, trigger_id, trigger_name, payload)
SELECT 'public', 'orders', e.id, e.name, jsonb_build_object('n', g)
FROM event_triggers e, generate_series(1, %(jobs)s) g WHERE e.name = 'claimcheck'
RETURNING id;

-- name: remaining
SELECT count(*) FROM event_log WHERE delivered = 'f';

-- name: claim
      UPDATE event_log
      SET locked = 't'
      WHERE id IN ( SELECT l.id
                    FROM event_log l
                    JOIN event_triggers e
                    ON (l.trigger_id = e.id)
                    WHERE l.delivered ='f' and l.error = 'f' and l.locked = 'f' and (l.next_retry_at is NULL or l.next_retry_at <= now())
                    LIMIT 100 )
      RETURNING id, schema_name, table_name, trigger_id, trigger_name, payload::json, tries, created_at;

-- name: complete
INSERT INTO event_invocation_logs (event_id, status, request, response)
VALUES (%(id)s, 200, '{}', '{}');
UPDATE event_log
SET tries = tries + 1
WHERE id = %(id)s;
UPDATE event_log
SET delivered = 't', error = 'f'
WHERE id = %(id)s;
UPDATE event_log
SET locked = 'f'
WHERE id = %(id)s;
