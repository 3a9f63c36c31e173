-- Absurd's worker statements, for the pgbench pass of `claimcheck lib absurd --pgbench`.
--
-- Absurd's claim and completion are stored functions of its schema (absurd.claim_task,
-- absurd.complete_run, installed by `absurdctl init`): the pgbench cycle runs the same functions the
-- installed schema holds. The calls around them are the SDK's, kept inline in absurd_sdk/__init__.py,
-- so these are copies, made from absurd-sdk 0.5.1 (pg_claimcheck.libs.absurd.SQL_COPIED_FROM; --pgbench
-- is refused with another version installed): verbatim but for the SDK's positional `%s`, named here.
-- Each runs autocommitted, as the SDK's connection is (`AsyncConnection.connect(..., autocommit=True)`).

-- AsyncAbsurd.claim_tasks (start_worker's claim: batch_size = concurrency, claim_timeout, worker_id).
-- name: claim
SELECT run_id, task_id, attempt, task_name, params, retry_strategy, max_attempts,
                      headers, wake_event, event_payload
               FROM absurd.claim_task(%(queue)s, %(worker_id)s, %(claim_timeout)s, %(batch_size)s)

-- _complete_task_run_async, once the handler returned (its return value as JSON).
-- name: complete
SELECT absurd.complete_run(%(queue)s, %(run_id)s, %(result)s)
