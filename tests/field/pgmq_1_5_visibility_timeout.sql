-- expected: unsafe
-- source: tembo-io/pgmq v1.5.1 (commit 7fd411d8ffd53b5313039f59167124c861d46430): pgmq-extension/sql/pgmq.sql lines 65-105 (read), 234-257 (delete), 707-760 (create_non_partitioned: queue table and vt index)
-- summary: no status column: a message is readable when vt <= clock_timestamp(); read locks candidates FOR UPDATE SKIP LOCKED and pushes vt forward (the visibility timeout, a lease re-taken by any reader once it passes); delete is by msg_id only
--
-- Translation: the queue table q_claimcheck as create_non_partitioned makes it, and the statement
-- pgmq.read builds and executes (no conditional filter), with `%(lease_seconds)s` as its vt and
-- `%(batch)s` as qty. The RETURNING names m.vt `lease_until` so claimcheck judges the re-take by
-- the server's clock. pgmq's README promises exactly-once delivery *within* the visibility
-- timeout: a run whose work outlasts vt re-delivers, and the first reader's later delete (not
-- fenced) removes a message another reader holds; see test_field.py for both runs. A default
-- `check` concludes the same under lease-expiry (docs/plans.md), hence `expected: unsafe`.

-- name: schema
CREATE TABLE q_claimcheck (
    msg_id BIGINT PRIMARY KEY GENERATED ALWAYS AS IDENTITY,
    read_ct INT DEFAULT 0 NOT NULL,
    enqueued_at TIMESTAMP WITH TIME ZONE DEFAULT now() NOT NULL,
    vt TIMESTAMP WITH TIME ZONE NOT NULL,
    message JSONB,
    headers JSONB
);
CREATE INDEX IF NOT EXISTS q_claimcheck_vt_idx ON q_claimcheck (vt ASC);

-- name: seed
INSERT INTO q_claimcheck (vt, message)
SELECT clock_timestamp(), jsonb_build_object('n', g) FROM generate_series(1, %(jobs)s) g
RETURNING msg_id;

-- name: remaining
SELECT count(*) FROM q_claimcheck;

-- name: claim
WITH cte AS
(
    SELECT msg_id
    FROM q_claimcheck
    WHERE vt <= clock_timestamp() AND CASE
        WHEN '{}'::jsonb != '{}'::jsonb THEN (message @> '{}'::jsonb)::integer
        ELSE 1
    END = 1
    ORDER BY msg_id ASC
    LIMIT %(batch)s
    FOR UPDATE SKIP LOCKED
)
UPDATE q_claimcheck m
SET
    vt = clock_timestamp() + make_interval(secs => %(lease_seconds)s),
    read_ct = read_ct + 1
FROM cte
WHERE m.msg_id = cte.msg_id
RETURNING m.msg_id, m.read_ct, m.enqueued_at, m.vt AS lease_until, m.message, m.headers;

-- name: complete
DELETE FROM q_claimcheck
WHERE msg_id = %(id)s
RETURNING msg_id;
