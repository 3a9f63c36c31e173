"""The knee of a rate sweep (pg_claimcheck.verdict.knee), the latency per interval, the time charts, and what
`bench --rate` refuses: pure functions of hand-built runs and records, and the CLI before any server."""
from __future__ import annotations

from array import array
from types import SimpleNamespace

import pytest

from pg_claimcheck.cli import main
from pg_claimcheck.engine.feedfigures import ProducerOutcome
from pg_claimcheck.engine.sampler import QueueSamples, queue_interval_s
from pg_claimcheck.report import svg
from pg_claimcheck.verdict.knee import knees, shortfalls
from pg_claimcheck.verdict.ledger import DONE, WorkerLog
from pg_claimcheck.verdict.timeline import latency_over_time

NO_SERVER = ["--dsn", "postgresql://nobody@127.0.0.1:1/none"]


def rate_run(rate: float, p99: float, *, kept_up: bool = True, achieved: float | None = None,
             exactly_once: bool = True, stopped_by: str = "drained", strategy: str = "skip-locked"):
    """What shortfalls and knees read of a RunResult: its producer's figures, verdict, end and setting."""
    producer = ProducerOutcome(rate_per_s=rate, duration_s=10, scheduled=int(rate * 10),
                               enqueued=int(rate * 10) if kept_up else int(rate * 5),
                               achieved_rate_per_s=rate if achieved is None else achieved,
                               max_lag_ms=5 if kept_up else 2500, kept_up=kept_up, claimed_before_last_enqueue=1,
                               pickup_latency_ms={"count": 1, "p50": p99 / 2, "p95": p99, "p99": p99, "max": p99},
                               end_to_end_latency_ms={"count": 1, "p50": 1, "p95": 1, "p99": 1, "max": 1})
    return SimpleNamespace(producer=producer, exactly_once=exactly_once, stopped_by=stopped_by,
                           strategy=SimpleNamespace(name=strategy),
                           settings=SimpleNamespace(mode="lease", workers=4, batch=10))


def test_a_run_sustains_its_rate_only_when_every_condition_holds():
    assert shortfalls(rate_run(200, 40), slo_ms=100) == []
    assert shortfalls(rate_run(200, 140), slo_ms=100) == ["pickup p99 140.0 ms > SLO 100 ms"]
    assert shortfalls(rate_run(200, 40, achieved=180), slo_ms=100) == [
        "achieved 180 jobs/s, under 95% of offered"]
    assert shortfalls(rate_run(200, 40, achieved=191), slo_ms=100) == []
    late = shortfalls(rate_run(200, 40, kept_up=False), slo_ms=100)
    assert late == ["producer fell behind (max lag 2,500 ms, 1,000 of 2,000 enqueued)"]
    assert shortfalls(rate_run(200, 40, exactly_once=False, stopped_by="violation"), slo_ms=100) == [
        "exactly-once violated", "did not drain (violation)"]


def test_the_knee_is_the_highest_rate_that_it_and_every_lower_rate_sustained():
    runs = [rate_run(500, 30), rate_run(200, 20), rate_run(1000, 250), rate_run(2000, 50)]  # a lucky 2000
    (knee,) = knees(runs, slo_ms=100)
    assert [p.rate_per_s for p in knee.points] == [200, 500, 1000, 2000]
    assert knee.rate_per_s == 500 and knee.first_unsustained.rate_per_s == 1000 and knee.summary == "500 jobs/s"
    data = knee.as_dict()
    assert data["knee_rate_per_s"] == 500 and data["knee_bounded"] and data["first_unsustained_rate_per_s"] == 1000
    assert [r["sustained"] for r in data["rates"]] == [True, True, False, True]
    (none,) = knees([rate_run(200, 300), rate_run(500, 20)], slo_ms=100)
    assert none.rate_per_s is None and none.summary == "below 200 jobs/s"
    (all_held,) = knees([rate_run(200, 3), rate_run(500, 4)], slo_ms=100)
    assert all_held.rate_per_s == 500 and not all_held.as_dict()["knee_bounded"]
    assert all_held.summary.startswith("≥ 500")


def test_each_strategy_and_setting_has_a_knee_of_its_own_and_seeded_runs_none():
    seeded = SimpleNamespace(producer=None)
    found = knees([rate_run(200, 20), rate_run(200, 20, strategy="for-update"), seeded,
                   rate_run(500, 200, strategy="for-update")], slo_ms=100)
    assert [(k.strategy, k.rate_per_s) for k in found] == [("skip-locked", 200), ("for-update", 200)]


def test_pickup_latency_per_interval_counts_each_produced_jobs_claim_where_it_committed():
    log = WorkerLog(worker=0)
    # Jobs 10.. are produced, one every 0.1 s from t=100; job 1 is seeded (no due time: not counted).
    for job, claimed in ((1, 100.05), (10, 100.02), (11, 100.15), (12, 100.9), (13, 100.33)):
        log.job.append(job), log.claimed_at.append(claimed), log.ended_at.append(claimed), log.outcome.append(DONE)
    due = {10 + k: 100 + k / 10 for k in range(4)}.get
    got = latency_over_time([log], origin=100.0, bucket_s=0.5, due=due)
    assert got["t_s"] == [0.0, 0.5] and got["count"] == [3, 1]
    assert got["p50"][0] == pytest.approx(30) and got["p99"][0] == pytest.approx(50) == got["max"][0]
    assert got["p99"][1] == pytest.approx(700)


def test_queue_samples_summarize_and_keep_their_time_order():
    q = QueueSamples(at=[9.9, 10.5, 11.0], rows=[(10, 0, 0, 8192, 0), (3, 2, 40, 16384, 0), (0, 0, 25, 16384, 1)],
                     interval_s=0.5)
    series = q.series(origin=10.0)
    assert series["t_s"] == [-0.1, 0.5, 1.0] and series["queued"] == [10, 3, 0] and series["vacuums"] == [0, 0, 1]
    assert q.summary() == {"samples": 3, "max_depth": 10, "final_depth": 0, "max_dead_tuples": 40,
                           "final_dead_tuples": 25, "max_table_bytes": 16384, "final_table_bytes": 16384}
    assert QueueSamples().summary()["max_depth"] is None
    assert queue_interval_s(2) == 0.1 and queue_interval_s(60) == 0.3 and queue_interval_s(600) == 3.0 and queue_interval_s(6000) == 5.0


def test_a_long_series_is_drawn_by_its_peaks_and_a_gap_breaks_the_line():
    points = [(t / 10, float(t % 7)) for t in range(3000)]
    drawn = svg.peaks(points)
    assert len(drawn) <= svg.MAX_TIME_POINTS and max(y for _, y in drawn) == 6.0
    chart = svg.time_chart({"p99": [(0, 1.0), (1, 2.0), (2, None), (3, 4.0), (4, 5.0)]}, "t", "ms",
                           reference=("SLO", 100.0))
    assert chart.count("<polyline") == 2 and 'class="reference"' in chart and "SLO 100" in chart


def test_bench_rate_takes_rates_ascending_and_each_once_and_refuses_a_word(capsys):
    from pg_claimcheck.commands._options import rate_list

    assert rate_list("1000,200,500,200") == [200.0, 500.0, 1000.0]
    with pytest.raises(SystemExit):
        main(["bench", "--rate", "10,abc", "--duration", "1", *NO_SERVER])
    assert "expected a rate or a comma-separated list of rates (jobs/s), got '10,abc'" in capsys.readouterr().err


@pytest.mark.parametrize("extra, words", [
    (["--rate", "10", "--duration", "1", "--pgbench"], "does not combine with --pgbench"),
    (["--rate", "10", "--duration", "1", "--repeat", "3"], "does not combine with --repeat"),
    (["--rate", "10", "--duration", "1", "--libs", "procrastinate"], "does not combine with --libs"),
    (["--rate", "10"], "--rate needs --duration"),
    (["--rate", "10", "--duration", "1", "--latency-slo", "0"], "--latency-slo must be positive"),
    (["--rate", "10", "--duration", "1", "--latency-slo", "nan"], "--latency-slo must be positive"),
])
def test_bench_rate_refuses_what_it_does_not_combine_with_before_anything_starts(capsys, extra, words):
    code = main(["bench", "--strategies", "skip-locked", *extra, *NO_SERVER])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and words in err and "cannot connect" not in err and "Traceback" not in err, err


def test_compare_matches_a_sweeps_runs_by_their_offered_rate(tmp_path):
    from rich.console import Console

    from pg_claimcheck.report.compare import compare, comparison_table
    from sample_reports import report, run_object

    base = report(*(run_object(offered_rate_per_s=r) for r in (200.0, 500.0)))
    new = report(run_object(offered_rate_per_s=200.0), run_object(offered_rate_per_s=500.0, ok=False))
    result = compare(base, new)
    assert [(d.key[5], d.status) for d in result.diffs] == [(200.0, "ok"), (500.0, "VERDICT REGRESSED")]
    shown = Console(width=250, record=True)
    shown.print(comparison_table(result, "rates"))
    assert "rate/s" in shown.export_text()
    plain = Console(width=250, record=True)
    plain.print(comparison_table(compare(report(run_object()), report(run_object())), "no rates"))
    assert "rate/s" not in plain.export_text()
