"""`check --rate`: an open-loop producer feeds the queue while the workers claim (pg_claimcheck.engine.producer).
Small, short runs on a real server: the point is that jobs arriving mid-run are judged like seeded
ones, that an unsafe claim is still caught under arrivals, and that a producer that falls behind
its schedule says so."""
from pathlib import Path

import jsonschema
import psycopg
import pytest
from rich.console import Console

from pg_claimcheck.errors import ClaimcheckError, ServerError, UsageError
from pg_claimcheck.report.render import results_table
from pg_claimcheck.report.validation import schema as report_schema
from pg_claimcheck.server.runcontext import RunContext
from pg_claimcheck.settings import RunSettings

SKIP_LOCKED = Path(__file__).resolve().parents[2] / "scenarios" / "skip_locked.sql"
SLOW_ENQUEUE = """
-- name: enqueue
SELECT pg_sleep(0.05);
INSERT INTO jobs (id, payload) OVERRIDING SYSTEM VALUE VALUES (%(key)s, '{}') RETURNING id;
"""


def test_a_rate_run_judges_jobs_enqueued_mid_run_exactly_once(run):
    # stop_early as `check` runs: the watch must know the producer's keys before they are enqueued.
    result = run("skip-locked", workers=3, jobs=20, batch=5, rate_per_s=200, produce_s=1.5, stop_early=True)
    p = result.producer
    assert result.exactly_once and result.stopped_by == "drained", result.verdict.violations[:3]
    # Whether the producer kept up is the machine's business (a busy one falls behind: reported, see
    # tests/benchmarks/rate_timings.py); whatever it enqueued is judged exactly like the seeded jobs.
    n = p.enqueued
    assert p.scheduled == 300 and 0 < n <= 300 and p.kept_up == (p.behind is None)
    assert result.seeded.count == 20 + n and result.jobs_done == 20 + n and result.verdict.unclaimed_jobs == 0
    assert 0 <= p.claimed_before_last_enqueue <= n
    assert p.pickup_latency_ms["count"] == n and p.end_to_end_latency_ms["count"] == n
    assert 0 < p.pickup_latency_ms["p50"] <= p.end_to_end_latency_ms["p50"] <= p.end_to_end_latency_ms["max"]
    # Never above the rate, however the machine does: no job is sent before its due time.
    assert p.achieved_rate_per_s <= 200 * (1 + 1e-9)
    data = result.as_dict()
    assert data["offered_rate_per_s"] == 200 and set(data["end_to_end_latency_ms"]) >= {"p50", "p95", "p99", "max"}
    shown = Console(width=250, record=True)
    shown.print(results_table([result], "rate"))
    text = shown.export_text()
    assert "end-to-end ms" in text and "200/" in text
    defs = report_schema()["$defs"]
    jsonschema.validate(data, {**defs["run"], "$defs": defs})


def test_an_unsafe_claim_is_caught_while_a_producer_runs(run):
    # One seeded job, and the run goes on past the first proof (the seeded job's, often): some double
    # claims are of jobs that arrived while the workers polled for them. No poll pause: idle workers
    # race for each job as it arrives.
    result = run("naive-subquery", workers=4, jobs=1, batch=1, poll_ms=0, rate_per_s=400, produce_s=1)
    assert not result.exactly_once and result.verdict.double_claimed_jobs > 0
    first_produced = result.seeded.first_id + 1
    assert any(x.job >= first_produced for x in result.verdict.violations), result.verdict.violations[:3]


def test_a_producer_that_cannot_keep_up_is_reported(run, tmp_path):
    path = tmp_path / "slow.sql"
    path.write_text(SKIP_LOCKED.read_text() + SLOW_ENQUEUE)
    result = run(str(path), workers=2, jobs=5, batch=5, rate_per_s=100, produce_s=1.0)
    p = result.producer
    assert result.exactly_once  # what it did enqueue is judged, and drained
    assert not p.kept_up and p.enqueued < p.scheduled == 100
    assert "could not keep up" in p.behind and "not enqueued" in p.behind
    assert result.seeded.count == 5 + p.enqueued and result.jobs_done == 5 + p.enqueued


def test_an_enqueue_that_returns_another_key_leaves_the_run_unjudged(run, tmp_path):
    path = tmp_path / "wrong.sql"
    path.write_text(SKIP_LOCKED.read_text() + SLOW_ENQUEUE.replace("pg_sleep(0.05)", "1").replace(
        "RETURNING id", "RETURNING id + 1"))
    with pytest.raises(ClaimcheckError, match="the producer failed: section 'enqueue' returned"):
        run(str(path), workers=2, jobs=5, batch=5, rate_per_s=50, produce_s=0.5)


def test_rate_needs_a_duration_and_refuses_limits():
    with pytest.raises(UsageError, match="--rate needs --duration"):
        RunSettings(rate_per_s=10)
    with pytest.raises(UsageError, match="does not combine"):
        RunSettings(rate_per_s=10, produce_s=1, claims_per_worker=5)


def test_a_producer_that_cannot_connect_is_reported_by_its_own_error_not_the_barriers(run, monkeypatch):
    connect = RunContext.connect

    def refuse_the_producer(self, role, *args, **kwargs):
        if role == "producer":
            raise psycopg.OperationalError("refused for the test")
        return connect(self, role, *args, **kwargs)

    monkeypatch.setattr(RunContext, "connect", refuse_the_producer)  # inherited by the forked producer
    with pytest.raises(ServerError, match="^the run could not start: the producer could not connect: refused for"):
        run("skip-locked", workers=2, jobs=5, batch=5, rate_per_s=50, produce_s=0.5)


def test_several_producers_share_the_schedule_and_every_job_is_judged(run):
    result = run("skip-locked", workers=3, jobs=10, batch=5, rate_per_s=300, produce_s=1.0, producers=3,
                 stop_early=True)
    p = result.producer
    assert result.exactly_once and result.stopped_by == "drained", result.verdict.violations[:3]
    n = p.enqueued  # all 300 on a quiet machine; a busy one may fall behind (tests/benchmarks/rate_timings.py)
    assert p.scheduled == 300 and [f.scheduled for f in p.producers] == [100] * 3
    assert n == sum(f.enqueued for f in p.producers) and all(0 < f.enqueued <= 100 for f in p.producers)
    assert result.seeded.count == 10 + n and result.jobs_done == 10 + n and result.verdict.unclaimed_jobs == 0
    assert p.pickup_latency_ms["count"] == n and 0 <= p.claimed_before_last_enqueue <= n
    assert [f["producer"] for f in result.as_dict()["producers"]] == [0, 1, 2]


def test_a_producer_behind_the_others_leaves_gaps_and_only_committed_keys_are_judged(run, tmp_path):
    # One producer of three is slow (its keys share a residue mod 3): it commits a prefix of its share,
    # the others all of theirs, so the committed keys are not a range. No reserved key it never
    # committed may count as lost.
    path = tmp_path / "one_slow.sql"
    path.write_text(SKIP_LOCKED.read_text() + SLOW_ENQUEUE.replace(
        "pg_sleep(0.05)", "pg_sleep(CASE WHEN %(key)s::bigint %% 3 = 0 THEN 0.05 ELSE 0 END)"))
    result = run(str(path), workers=2, jobs=5, batch=5, rate_per_s=150, produce_s=1.0, producers=3)
    p = result.producer
    late = [f for f in p.producers if not f.kept_up]
    # The slow one is late; on a busy machine another may be too (a timing, not this test's point).
    assert late and all(f.enqueued < f.scheduled == 50 for f in late), p.producers
    assert all(f.enqueued == 50 for f in p.producers if f.kept_up)
    assert not p.kept_up and p.behind.startswith(f"{len(late)} of 3 producers could not keep up")
    assert f"producer {late[0].producer}: " in p.behind and "not enqueued" in p.behind
    assert result.exactly_once and result.verdict.unclaimed_jobs == 0 and result.verdict.unexpected_jobs == 0
    assert result.seeded.count == 5 + p.enqueued == result.jobs_done
    assert result.seeded.keys is not None  # the gaps: a key space of the committed keys themselves


def test_an_unsafe_claim_is_caught_while_several_producers_run(run):
    result = run("naive-subquery", workers=4, jobs=1, batch=1, poll_ms=0, rate_per_s=400, produce_s=1, producers=2)
    assert not result.exactly_once and result.verdict.double_claimed_jobs > 0
    keys = result.seeded.keys
    first_produced = (keys.keys[0] if keys is not None and keys.keys is not None else result.seeded.first_id) + 1
    assert any(x.job >= first_produced for x in result.verdict.violations), result.verdict.violations[:3]


def test_producers_without_a_rate_are_refused():
    with pytest.raises(UsageError, match="--producers needs --rate"):
        RunSettings(producers=2)
    with pytest.raises(UsageError, match="--producers must be between 1 and 32"):
        RunSettings(rate_per_s=10, produce_s=1, producers=0)


UUID_QUEUE = """
-- name: schema
CREATE TABLE q (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), status text NOT NULL DEFAULT 'queued');
-- name: seed
INSERT INTO q SELECT FROM generate_series(1, %(jobs)s) RETURNING id;
-- name: remaining
SELECT count(*) FROM q WHERE status <> 'done';
-- name: enqueue
INSERT INTO q DEFAULT VALUES RETURNING id;
-- name: claim
WITH picked AS (SELECT id FROM q WHERE status = 'queued' LIMIT %(batch)s {lock})
UPDATE q SET status = 'running' FROM picked WHERE q.id = picked.id RETURNING q.id;
-- name: complete
UPDATE q SET status = 'done' WHERE id = %(id)s AND status = 'running';
"""
IDENTITY_QUEUE = """
-- name: schema
CREATE TABLE q (id bigint GENERATED ALWAYS AS IDENTITY (START WITH 1000) PRIMARY KEY);
-- name: seed
INSERT INTO q SELECT FROM generate_series(1, %(jobs)s) RETURNING id;
-- name: remaining
SELECT count(*) FROM q;
-- name: enqueue
INSERT INTO q DEFAULT VALUES RETURNING id;
INSERT INTO q DEFAULT VALUES RETURNING id;
-- name: claim
DELETE FROM q WHERE id = (SELECT id FROM q ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id;
"""


def test_a_files_own_tables_are_fed_through_its_enqueue_and_its_keys_learnt(run, tmp_path):
    # uuid keys the enqueue makes, unknown until it returns them: judged like the seeded ones, with stop_early
    # as `check` runs (an unseen key mid-run is no proof here: it may be a produced one).
    path = tmp_path / "uuid_queue.sql"
    path.write_text(UUID_QUEUE.format(lock="FOR UPDATE SKIP LOCKED"))
    result = run(str(path), workers=3, jobs=10, batch=2, rate_per_s=200, produce_s=1.0, producers=2, stop_early=True)
    p = result.producer
    assert result.exactly_once and result.stopped_by == "drained", result.verdict.violations[:3]
    n = p.enqueued  # 200 unless the machine held the producers back
    assert 0 < n <= 200 and result.seeded.count == 10 + n == result.jobs_done
    assert result.verdict.unclaimed_jobs == 0 and result.verdict.unexpected_jobs == 0
    assert p.pickup_latency_ms["count"] == n and p.end_to_end_latency_ms["count"] == n


def test_an_enqueue_of_two_jobs_on_identity_keys_is_judged_on_the_keys_it_returned(run, tmp_path):
    # Each enqueue makes two jobs (its section's last statement returns the second; the first is the
    # section's own business and is not a job the ledger knows) -- so the claim, which takes every row,
    # hands out keys nobody reported: unexpected.
    path = tmp_path / "identity_queue.sql"
    path.write_text(IDENTITY_QUEUE)
    result = run(str(path), workers=2, jobs=5, batch=1, rate_per_s=100, produce_s=0.5)
    assert not result.exactly_once and result.verdict.unexpected_jobs == result.producer.enqueued == 50


def test_an_unsafe_claim_on_a_files_own_fed_tables_is_caught(run, tmp_path):
    path = tmp_path / "uuid_no_lock.sql"
    path.write_text(UUID_QUEUE.format(lock=""))
    result = run(str(path), workers=4, jobs=1, batch=1, poll_ms=0, rate_per_s=400, produce_s=1.0)
    assert not result.exactly_once and result.verdict.double_claimed_jobs > 0
    assert result.verdict.unexpected_jobs == 0


def test_a_files_own_tables_without_an_enqueue_are_refused_with_rate(run, tmp_path):
    path = tmp_path / "no_enqueue.sql"
    path.write_text(UUID_QUEUE.format(lock="FOR UPDATE SKIP LOCKED").replace(
        "-- name: enqueue\nINSERT INTO q DEFAULT VALUES RETURNING id;\n", ""))
    with pytest.raises(UsageError, match="--rate needs its `enqueue` section"):
        run(str(path), workers=2, jobs=5, batch=1, rate_per_s=10, produce_s=0.5)


def test_wakeup_notify_wakes_idle_workers_by_the_producers_notifications(run):
    # A poll pause of 5 s that notify never sleeps: jobs are picked up because a notification woke a worker.
    result = run("skip-locked", workers=3, jobs=5, batch=5, poll_ms=5000, rate_per_s=50, produce_s=1.0,
                 wakeup="notify", stop_early=True)
    p = result.producer
    assert result.exactly_once and result.stopped_by == "drained" and result.jobs_done == 5 + p.enqueued
    assert p.wakeups["listen"] == 3 and p.wakeups["notified"] > 0, p.wakeups
    assert result.as_dict()["wakeup"]["kind"] == "notify"
    # Poll without it: the same run's idle workers sleep 5 s after their first empty claim. How much later
    # they pick up is a timing, printed by tests/benchmarks/rate_timings.py, not asserted here.
    polled = run("skip-locked", workers=3, jobs=5, batch=5, poll_ms=5000, rate_per_s=50, produce_s=1.0)
    assert polled.producer.wakeups is None and polled.as_dict()["wakeup"] == {"kind": "poll"}


def test_an_unsafe_claim_is_caught_under_wakeup_notify(run):
    result = run("naive-subquery", workers=4, jobs=1, batch=1, rate_per_s=300, produce_s=1, wakeup="notify")
    assert not result.exactly_once and result.verdict.double_claimed_jobs > 0


def test_wakeup_notify_is_refused_for_a_files_own_enqueue(run, tmp_path):
    path = tmp_path / "own_enqueue.sql"
    path.write_text(SKIP_LOCKED.read_text() + SLOW_ENQUEUE.replace("pg_sleep(0.05)", "1"))
    with pytest.raises(UsageError, match="--wakeup notify is for claimcheck's jobs table"):
        run(str(path), workers=2, jobs=5, batch=5, rate_per_s=10, produce_s=0.5, wakeup="notify")
    with pytest.raises(UsageError, match="--wakeup notify needs --rate"):
        RunSettings(wakeup="notify")
