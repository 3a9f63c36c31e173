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


LOAD_SHORTFALLS = ("producer fell behind", "achieved ", "pickup p99 ")
"""The shortfalls a busy machine alone can cause (pg_claimcheck.verdict.knee.shortfalls): a rate, a lag, a latency."""


def test_a_sweep_over_two_rates_gives_each_strategy_a_knee(run, server, record_property):
    """The knee is read from each rate's shortfalls, and the report says the same knee. Which rate is the knee
    depends on the machine (a producer held back, a rate short of 95% of offered at load 20): reported, not
    asserted; tests/unit/test_knee.py asserts the rule, tests/benchmarks/rate_timings.py how often load moves it."""
    results = sweep(run)
    assert all(r.exactly_once and r.stopped_by == "drained" for r in results), [r.verdict.violations[:3] for r in results]
    generous = knees(results, slo_ms=5_000)
    assert [(k.strategy, k.mode, k.workers, k.batch) for k in generous] == [
        ("skip-locked", "lease", 2, 5), ("for-update", "lease", 2, 5)]
    for knee in generous:
        assert [p.rate_per_s for p in knee.points] == list(RATES)
        # Exactly-once held and every run drained: what is left to fall short is the machine's.
        assert all(s.startswith(LOAD_SHORTFALLS) for p in knee.points for s in p.shortfalls), knee.points
        record_property(f"knee {knee.strategy} 2w b5 (SLO 5 s)", f"{knee.summary}; " + ", ".join(
            f"{p.rate_per_s:g}/s: {'held' if p.sustained else '; '.join(p.shortfalls)}" for p in knee.points))
    # An SLO no pickup meets: the lowest rate falls over, on its latency among what it lacked, and there is no knee.
    strict = knees(results, slo_ms=0.001)
    for knee in strict:
        assert knee.rate_per_s is None and knee.first_unsustained.rate_per_s == RATES[0]
        assert f"pickup p99 {knee.points[0].pickup_p99_ms:,.1f} ms > SLO 0.001 ms" in knee.first_unsustained.shortfalls
    doc = document(server, results, command="claimcheck bench --rate 20,60", settings={}, knees=generous)
    assert_valid_report(doc)
    assert [k["knee_rate_per_s"] for k in doc["knees"]] == [k.rate_per_s for k in generous]
    for k, knee in zip(doc["knees"], generous):
        assert k["summary"] == knee.summary and k["knee_bounded"] == (knee.first_unsustained is not None)


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
