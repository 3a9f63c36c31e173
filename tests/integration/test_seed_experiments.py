"""The seeds' experiments, reproduced through our driver."""


def test_seed_003_pgbench_naive_statement(run):
    """8 workers x 1,250 claims of the naive single-row statement that also marks the job done
    (pgbench -c 8 -t 1250 -f naive.sql): far fewer jobs done than claims, some job claimed by
    several workers. The seed saw about 2,100 of 10,000 done and max attempts 8."""
    result = run("naive-single-done", workers=8, jobs=10_000, claims_per_worker=1_250)
    v = result.verdict
    assert result.claim_statements == 10_000
    assert result.table.done == v.unique_jobs_claimed
    assert result.table.done < 0.8 * v.claims, (result.table.done, v.claims)
    assert result.table.max_attempts >= 3
    assert v.double_claimed_jobs > 0
    # The seed's own table: status | count | max_attempts, as --claims-per-worker prints it.
    by_status = {status: (count, most) for status, count, most in result.table.by_status}
    assert set(by_status) == {"done", "queued"} and sum(c for c, _ in by_status.values()) == 10_000
    assert by_status["done"] == (result.table.done, result.table.max_attempts) and by_status["queued"][1] == 0
    assert result.as_dict()["table_by_status"][0] == {"status": "done", "count": result.table.done,
                                                      "max_attempts": result.table.max_attempts}


def test_seed_003_pgbench_with_skip_locked(run):
    result = run("skip-locked-done", workers=8, jobs=10_000, claims_per_worker=1_250)
    assert result.table.done == 10_000
    assert result.table.max_attempts == 1
    assert result.verdict.double_claimed_jobs == 0


def test_for_update_in_lock_mode_makes_workers_wait_on_each_other(run):
    """Seed 000: with plain FOR UPDATE, seven of eight workers waited on transactionid;
    with SKIP LOCKED there were none."""
    settings = dict(workers=8, jobs=1_500, batch=10, mode="lock", work="2")
    from pg_claimcheck.settings import WorkTime

    settings["work"] = WorkTime.parse("2")
    for_update = run("for-update", **settings)
    skip_locked = run("skip-locked", **settings)
    assert for_update.exactly_once and skip_locked.exactly_once
    fu_events, sl_events = for_update.waits.events, skip_locked.waits.events
    assert fu_events["Lock/transactionid"] > 0
    assert for_update.waits.max_waiting_workers >= 8 // 2, for_update.waits
    assert sl_events["Lock/transactionid"] <= fu_events["Lock/transactionid"] / 20
    assert skip_locked.waits.max_waiting_workers <= 1
