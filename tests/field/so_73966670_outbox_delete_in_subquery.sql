-- expected: unsafe
-- source: Stack Overflow question 73966670, "SELECT FOR UPDATE subquery not respecting LIMIT clause under load" (https://stackoverflow.com/questions/73966670; read as archived at https://kiwix.lema.org/stackoverflow.com_en_all_2023-11/questions/73966670/select-for-update-subquery-not-respecting-limit-clause-under-load)
-- summary: DELETE FROM outbox_queue WHERE id IN (SELECT id ... delay_until IS NULL OR now() > delay_until ORDER BY enqueued_on, id LIMIT 10 FOR UPDATE SKIP LOCKED) RETURNING *
--
-- Translation: the question gives the statements, not the table: outbox_queue is reconstructed
-- from the columns they use (id, enqueued_on, delay_until; a payload) with an index on
-- (enqueued_on, id) for the ORDER BY. The DELETE ... RETURNING is the claim and the completion in
-- one (no `complete` section: a message is done when it is deleted). It asks for LIMIT 10, so
-- claimcheck judges it against 10 whatever --batch says (pg_claimcheck.contract.limit).
-- The asker (PostgreSQL 10.18, three workers): "when I apply load tests to my system, I will
-- occasionally (under 5 percent) get results the range from dozens of records to even several hundred
-- records being returned". His plan (in the question) is a Nested Loop over a HashAggregate of the
-- subquery, which runs it once; the plan that over-claims has it on the inner side. Measured on
-- PostgreSQL 15 (tests/benchmarks/field_plans.py): analyzed at 41 rows, a Hash Semi Join, 10
-- rows; analyzed at 1 row and filled to 41, a Nested Loop Semi Join rescanning the subquery 41
-- times, 41 rows; 200 rows with hashing, sorting and materializing off, 200 rows.

-- name: schema
CREATE TABLE outbox_queue (
  id bigserial PRIMARY KEY,
  enqueued_on timestamptz NOT NULL DEFAULT now(),
  delay_until timestamptz,
  payload jsonb NOT NULL
);
CREATE INDEX outbox_queue_enqueued_on_id ON outbox_queue (enqueued_on, id);

-- name: seed
INSERT INTO outbox_queue (enqueued_on, payload)
SELECT now() - (%(jobs)s - g) * interval '1 microsecond', jsonb_build_object('n', g) FROM generate_series(1, %(jobs)s) g
RETURNING id;

-- name: remaining
SELECT count(*) FROM outbox_queue;

-- name: claim
DELETE FROM outbox_queue
WHERE id IN (
    SELECT id FROM outbox_queue
    WHERE delay_until IS NULL OR now() > delay_until
    ORDER BY enqueued_on, id
    LIMIT 10
    FOR UPDATE SKIP LOCKED
)
RETURNING *;
