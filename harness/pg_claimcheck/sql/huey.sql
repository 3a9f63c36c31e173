-- huey's worker statements, for the pgbench pass of `claimcheck lib huey --pgbench`.
--
-- huey keeps its SQL inline in the methods of huey.storage.PostgresStorage, so these are copies,
-- made from huey 3.5.4 (huey/storage.py; pg_claimcheck.libs.huey.SQL_COPIED_FROM names the version, and
-- --pgbench is refused with another one installed). huey writes them with positional `%s`; here they
-- are named, `{t}` is its table (`<prefix>_task`, `<prefix>_kv`), and each runs autocommitted, as huey's
-- connection does.

-- PostgresStorage._dequeue: the claim, which takes the task out of the queue.
-- name: dequeue
delete from {t} where id = (select id from {t} where queue = %(queue)s order by priority desc, id limit 1 for update skip locked) returning data

-- PostgresStorage.peek_many, as Huey.is_revoked calls it before each execution.
-- name: peek_many
select key, value from {t} where queue = %(queue)s and key = any(%(keys)s)

-- PostgresStorage.put_data, as Huey.put_result stores the task's return value.
-- name: put_data
insert into {t} (queue, key, value) values (%(queue)s, %(key)s, %(value)s) on conflict (queue, key) do update set value = excluded.value
