-- expected: unsafe
-- summary: the IN-subquery claim on a file's own table (an outbox): the conditions build and
--   analyze these tables, not claimcheck's jobs table.
-- name: schema
CREATE TABLE outbox (
    id bigint PRIMARY KEY,
    topic text NOT NULL DEFAULT 'orders',
    taken_by text,
    taken_at timestamptz
);

-- name: seed
INSERT INTO outbox (id) SELECT %(key_base)s + g FROM generate_series(0, %(jobs)s - 1) g RETURNING id;

-- name: remaining
SELECT count(*) FROM outbox WHERE taken_by IS NULL;

-- name: claim
UPDATE outbox SET taken_by = %(worker)s, taken_at = now()
WHERE id IN (SELECT id FROM outbox WHERE taken_by IS NULL ORDER BY id LIMIT %(batch)s FOR UPDATE SKIP LOCKED)
RETURNING id;
