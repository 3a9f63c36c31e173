"""`bench --rate`'s sweep and a rate run's series over time, on a real server (docs/producers.md):
each strategy's knee from rate runs at two small rates, the queue sampler's depth, dead tuples and
table size in time order with the queue empty after the drain, and the HTML charting them. Short
runs (a second of producing each): the point is the figures' shape, not their size."""
from html.parser import HTMLParser

from pg_claimcheck.report.html import render
from pg_claimcheck.report.render import document
from pg_claimcheck.verdict.knee import knees
from sample_reports import assert_valid_report

RATES = (20.0, 60.0)


class Charts(HTMLParser):
    """The charts (`data-chart`) of a page, and the series drawn in each."""

    def __init__(self):
        super().__init__()
        self.series: dict[str, set[str]] = {}
        self._chart = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "data-chart" in a:
            self._chart = a["data-chart"]
            self.series.setdefault(self._chart, set())
        if tag == "polyline" and self._chart:
            self.series[self._chart].add(a["data-series"])


def sweep(run, strategies=("skip-locked", "for-update")):
    return [run(name, workers=2, jobs=5, batch=5, rate_per_s=rate, produce_s=1.0)
            for name in strategies for rate in RATES]


def test_a_sweep_over_two_rates_gives_each_strategy_a_knee(run, server):
    results = sweep(run)
    assert all(r.exactly_once for r in results), [r.verdict.violations[:3] for r in results]
    # A busy machine can hold a producer back (tests/benchmarks/rate_timings.py prints how often): the knee
    # is then lower, and that run is reported, not failed. Where every producer kept up, the knee is the top.
    kept_up = all(r.producer.kept_up for r in results)
    generous = knees(results, slo_ms=5_000)
    assert [(k.strategy, k.mode, k.workers, k.batch) for k in generous] == [
        ("skip-locked", "lease", 2, 5), ("for-update", "lease", 2, 5)]
    for knee in generous:
        assert [p.rate_per_s for p in knee.points] == list(RATES)
        if kept_up:
            assert knee.rate_per_s == RATES[-1] and knee.first_unsustained is None, [p.shortfalls for p in knee.points]
    # An SLO no pickup meets: the lowest rate falls over, on its latency alone, and there is no knee.
    strict = knees(results, slo_ms=0.001)
    for knee in strict:
        assert knee.rate_per_s is None and knee.first_unsustained.rate_per_s == RATES[0]
        assert [s for s in knee.first_unsustained.shortfalls] == [
            f"pickup p99 {knee.points[0].pickup_p99_ms:,.1f} ms > SLO 0.001 ms"]
    doc = document(server, results, command="claimcheck bench --rate 20,60", settings={}, knees=generous)
    assert_valid_report(doc)
    assert [k["knee_rate_per_s"] for k in doc["knees"]] == [60.0, 60.0]
    assert all(k["summary"].startswith("≥ 60") and not k["knee_bounded"] for k in doc["knees"])


def test_a_rate_run_records_the_queue_and_the_latency_over_time_and_ends_drained(run):
    result = run("skip-locked", workers=3, jobs=5, batch=5, rate_per_s=100, produce_s=1.5)
    assert result.exactly_once and result.over_time is not None
    data = result.as_dict()
    queue, summary, latency = data["queue_over_time"], data["queue_summary"], data["latency_over_time"]
    t = queue["t_s"]
    # One sample per interval from before the release to the drain, and one more after it.
    assert len(t) >= 1.5 / queue["interval_s"] and all(a < b for a, b in zip(t, t[1:]))
    assert all(len(queue[name]) == len(t) for name in ("queued", "running", "dead_tuples", "table_bytes", "vacuums"))
    assert queue["queued"][-1] == 0 and queue["running"][-1] == 0 and summary["final_depth"] == 0
    assert summary["max_depth"] == max(queue["queued"]) >= 1 and summary["samples"] == len(t)
    assert summary["max_table_bytes"] == max(queue["table_bytes"]) > 0
    assert summary["final_dead_tuples"] == queue["dead_tuples"][-1] <= summary["max_dead_tuples"]
    # Latency per interval: every claim of a produced job counted once, in time order.
    lt = latency["t_s"]
    assert all(a < b for a, b in zip(lt, lt[1:])) and latency["bucket_s"] == queue["interval_s"]
    assert sum(latency["count"]) == data["pickup_latency_ms"]["count"] == 150
    for n, p50, p99, top in zip(latency["count"], latency["p50"], latency["p99"], latency["max"]):
        assert (n == 0) == (p99 is None) and (n == 0 or 0 < p50 <= p99 <= top)


def test_the_html_report_charts_the_knees_and_each_rate_runs_depth_and_latency(run, server):
    results = sweep(run, strategies=("skip-locked",))
    page = render(document(server, results, command="claimcheck bench --rate 20,60", settings={},
                           knees=knees(results, slo_ms=5_000)))
    charts = Charts()
    charts.feed(page)
    assert charts.series["knees"] == {"skip-locked · lease · b5 · 2w"}
    assert charts.series["depth-over-time"] == {"queued", "running"}
    assert charts.series["latency-over-time"] == {"p50", "p99"}
    assert "dead-tuples-over-time" in charts.series
    assert "Knees: the highest offered rate sustained" in page and "at 60 jobs/s" in page
    # A report without rate runs has none of them.
    plain = Charts()
    plain.feed(render(document(server, [run("skip-locked", workers=2, jobs=20, batch=5)], command="c", settings={})))
    assert not {"knees", "depth-over-time", "latency-over-time"} & set(plain.series)
