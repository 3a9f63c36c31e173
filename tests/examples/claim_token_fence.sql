-- summary: a visibility-timeout queue whose acknowledgement is fenced by a token the claim returned
--
-- A worker owns a job by the claim_token its claim wrote (Hangfire's, BullMQ's lock token, a claim
-- id): every new claim of the job, after its visibility timeout, writes a new token, so a late
-- acknowledgement from an earlier holder changes no row. The id + attempts fence (read_ct here)
-- would hold as well; this file shows the contract carrying the claim's other columns to
-- `complete` by name (docs/contracts.md, section 1). No `fail` or `extend`: the claim re-takes a
-- message whose vt passed, as pgmq does.

-- name: schema
CREATE TABLE q (id bigint PRIMARY KEY, read_ct int NOT NULL DEFAULT 0,
                vt timestamptz NOT NULL DEFAULT clock_timestamp(), done_at timestamptz,
                claim_token uuid);

-- name: seed
INSERT INTO q (id) SELECT %(key_base)s + g FROM generate_series(0, %(jobs)s - 1) g RETURNING id;

-- name: remaining
SELECT count(*) FROM q WHERE done_at IS NULL;

-- name: claim
WITH cte AS (SELECT id FROM q WHERE done_at IS NULL AND vt <= clock_timestamp()
             ORDER BY id LIMIT %(batch)s FOR UPDATE SKIP LOCKED)
UPDATE q SET vt = clock_timestamp() + make_interval(secs => %(lease_seconds)s), read_ct = q.read_ct + 1,
             claim_token = gen_random_uuid()
FROM cte WHERE q.id = cte.id
RETURNING q.id, q.read_ct, q.vt AS lease_until, q.claim_token;

-- name: complete
UPDATE q SET done_at = now() WHERE id = %(id)s AND claim_token = %(claim_token)s;
