-- expected: safe
-- source: the accepted answer (Erwin Brandstetter's) to Stack Overflow question 73966670 (https://stackoverflow.com/questions/73966670; the question read as archived at https://kiwix.lema.org/stackoverflow.com_en_all_2023-11/questions/73966670/select-for-update-subquery-not-respecting-limit-clause-under-load, which names "Erwin's answer"; the answer's statement read as quoted at https://openillumi.com/en/en-postgresql-for-update-limit-fix-cte, the archived page's answer text not being in the search tools)
-- summary: WITH sel AS (SELECT id ... delay_until >= now() IS NOT TRUE ORDER BY enqueued_on, id LIMIT 10 FOR UPDATE SKIP LOCKED) DELETE FROM outbox_queue WHERE id IN (TABLE sel) RETURNING *
--
-- Translation: the question gives the statements, not the table: outbox_queue is reconstructed
-- from the columns they use (id, enqueued_on, delay_until; a payload) with an index on
-- (enqueued_on, id) for the ORDER BY. The DELETE ... RETURNING is the claim and the completion in
-- one (no `complete` section: a message is done when it is deleted). It asks for LIMIT 10, so
-- claimcheck judges it against 10 whatever --batch says (pg_claimcheck.contract.limit).
-- The CTE locks its rows (FOR UPDATE), so PostgreSQL does not fold it into the DELETE: it runs
-- once and a rescan of it re-reads its stored rows: 10 rows under every plan
-- tests/benchmarks/field_plans.py tried, the Nested Loop Semi Join with the CTE Scan rescanned
-- 41 times included.

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
WITH sel AS (
   SELECT id
   FROM   outbox_queue
   WHERE  delay_until >= now() IS NOT TRUE
   ORDER  BY enqueued_on, id
   LIMIT  10
   FOR    UPDATE SKIP LOCKED
   )
DELETE FROM outbox_queue
WHERE id IN (TABLE sel)
RETURNING *;
