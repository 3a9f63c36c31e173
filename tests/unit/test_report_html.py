"""The HTML report and its charts, from hand-built run objects: parsed, not eyeballed."""
import re
from html.parser import HTMLParser

from pg_claimcheck.report import svg
from pg_claimcheck.report.html import conclusion, lock_wait_seconds, render, throughput_series
from pg_claimcheck.verdict.ledger import WorkerLog
from pg_claimcheck.verdict.timeline import claims_over_time


def run(strategy, workers, jobs_per_s, doubles=0, waits=None, mode="lease", timeline=True):
    return {
        "strategy": strategy, "mode": mode, "batch": 10, "workers": workers, "claims": 100 + doubles,
        "double_claimed_jobs": doubles, "unclaimed_jobs": 0, "jobs_done": 100, "throughput_jobs_per_s": jobs_per_s,
        "claim_latency_ms": {"p50": 1.0, "p95": 2.0, "p99": 3.0, "max": 4.0}, "exactly_once": doubles == 0,
        "wait_events": waits or {}, "elapsed_s": 0.5, "pgbench_jobs_per_s": 2 * jobs_per_s, "pgbench_ratio": 0.5,
        "claims_over_time": {"bucket_s": 0.01, "workers": {f"w{i:02d}": [i, 0, 3] for i in range(workers)}}
        if timeline else {},
    }


DOC = {
    "tool": {"command": "claimcheck bench --workers 1,4"},
    "postgres": {"version": "16.4", "source": "dsn"},
    "created_at": "2026-01-01T00:00:00Z",
    "runs": [run("naive-subquery", 1, 900.0), run("naive-subquery", 4, 1500.0, doubles=40,
                                                  waits={"Lock/transactionid": 7, "Lock/tuple": 2, "IO/DataFileRead": 9}),
             run("skip-locked", 1, 1000.0), run("skip-locked", 4, 3000.0, waits={"Client/ClientRead": 50})],
}


class Outline(HTMLParser):
    """Which charts, SVGs, violated-run marks, table headings and external references a page has."""

    def __init__(self):
        super().__init__()
        self.charts, self.svgs, self.polylines, self.cells, self.external = [], 0, [], 0, []
        self.flagged: dict[str, int] = {}
        self.headings: list[str] = []
        self._in_th = False

    def handle_data(self, data):
        if self._in_th:
            self.headings.append(data)

    def handle_endtag(self, tag):
        self._in_th = self._in_th and tag != "th"

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self._in_th = self._in_th or tag == "th"
        if "data-chart" in a:
            self.charts.append(a["data-chart"])
            self._chart = a["data-chart"]
        if a.get("class") == "flagged":
            self.flagged[self._chart] = self.flagged.get(self._chart, 0) + 1
        self.svgs += tag == "svg"
        if tag == "polyline":
            self.polylines.append(a["data-series"])
        self.cells += a.get("class") == "cell"
        for key in ("src", "href"):
            if key in a:
                self.external.append(a[key])
        if tag in ("script", "link"):
            self.external.append(tag)


def test_report_has_every_chart_and_nothing_external():
    page = render(DOC)
    outline = Outline()
    outline.feed(page)
    assert outline.charts == ["throughput", "double-claims", "claim-latency", "lock-waits", "claims-over-time",
                              "claims-over-time", "claims-over-time", "claims-over-time"]
    assert outline.svgs == 8
    assert outline.polylines == ["naive-subquery · lease · b10", "skip-locked · lease · b10"]
    assert outline.cells > 0
    assert outline.external == []  # opens offline: no script, stylesheet, image or font to fetch
    assert "VIOLATED" in page and "exactly-once" in page and "0.50" in page


def test_series_and_stacks_come_from_the_runs():
    assert throughput_series(DOC["runs"])["skip-locked · lease · b10"] == [(1.0, 1000.0), (4.0, 3000.0)]
    seconds = lock_wait_seconds(DOC["runs"])  # samples x the 50 ms interval; only Lock/* events
    assert seconds == {"Lock/transactionid": [0, 7 * 0.05, 0, 0], "Lock/tuple": [0, 2 * 0.05, 0, 0]}


def test_report_without_timelines_or_lock_waits_still_renders():
    page = render({"runs": [run("skip-locked", 2, 10.0, timeline=False)]})
    assert "No per-worker timeline" in page and "no lock waits sampled" in page


def test_nice_ticks_cover_the_range_in_round_steps():
    assert svg.nice_ticks(9_467) == [0, 2000, 4000, 6000, 8000, 10000]
    assert svg.nice_ticks(0) == [0.0, 1.0]
    assert svg.nice_ticks(3)[-1] >= 3


def test_claims_over_time_buckets_each_workers_claims():
    a, b = WorkerLog(worker=0), WorkerLog(worker=3)
    for at in (10.0, 10.05, 10.95, 11.5):  # 11.5 is past the end: counted in the last bucket
        a.record(1, 1, at)
    b.record(2, 1, 10.5)
    timeline = claims_over_time([a, b], origin=10.0, elapsed_s=1.0, buckets=10)
    assert timeline["bucket_s"] == 0.1
    assert timeline["workers"]["w00"] == [2, 0, 0, 0, 0, 0, 0, 0, 0, 2]
    assert timeline["workers"]["w03"] == [0, 0, 0, 0, 0, 1, 0, 0, 0, 0]


def test_one_worker_count_shows_throughput_as_bars():
    outline = Outline()
    outline.feed(render({"runs": [run("skip-locked", 8, 10.0), run("for-update", 8, 5.0)]}))
    assert outline.charts[0] == "throughput" and outline.polylines == []


def test_violated_runs_are_marked_in_every_chart():
    outline = Outline()
    outline.feed(render(DOC))
    # naive-subquery at 4 workers violated: a ✗ marker on the line, a red label in each bar/range chart.
    assert outline.flagged == {"throughput": 1, "double-claims": 1, "claim-latency": 1, "lock-waits": 1}


def test_a_run_without_progress_reads_no_progress_wherever_its_verdict_shows():
    stuck = {**run("skip-locked", 2, 0.0), "exactly_once": False, "outcome": "no-progress"}
    page = render({"runs": [stuck]})
    # The table's verdict and the timeline's summary say the same: a liveness failure, no violation.
    assert page.count("✗ NO PROGRESS") == 2 and "VIOLATED</span>" not in page


def test_the_conclusion_names_the_fastest_that_held_and_what_the_others_cost():
    text = conclusion(DOC["runs"])
    assert "3 of 4 runs held exactly-once" in text and "Violated: naive-subquery" in text
    assert "lease mode: pick skip-locked · b10</b>, the fastest that held in every run: 3,000 jobs/s at 4" in text
    # naive-subquery held at 1 worker but not at 4: it does not count, and is not offered as "the others".
    assert "Faster but violated" not in text and "naive-subquery · b10 900" not in text
    two = conclusion([run("skip-locked", 4, 3000.0), run("for-update", 4, 1500.0)])
    assert "for-update · b10 1,500 jobs/s at 4 (-50 %)" in two
    assert "no strategy held" in conclusion([run("naive-subquery", 4, 1.0, doubles=3), run("cte-no-lock", 4, 1.0, doubles=2)])
    assert "naive-subquery · b10 did not hold" in conclusion([run("naive-subquery", 4, 1.0, doubles=3)])


def test_empty_columns_are_left_out():
    outline = Outline()
    outline.feed(render({"runs": [{**run("skip-locked", 2, 10.0), "pgbench_jobs_per_s": None, "pgbench_ratio": None}]}))
    assert "pgbench jobs/s" not in outline.headings and "ratio" not in outline.headings
    assert "spread" not in outline.headings and outline.headings[:2] == ["strategy", "verdict"]


def test_a_violated_run_gets_no_full_throughput_bar():
    page = render({"tool": {"command": "claimcheck bench"}, "runs": [run("naive-subquery", 4, 4100.0, doubles=3),
                                                                     run("skip-locked", 4, 3600.0)]})
    throughput = page.split('data-chart="throughput"')[1].split("</figure>")[0]
    violated, = re.findall(r'<rect class="bar violated"[^>]*>', throughput)
    assert 'fill="none"' in violated and "stroke-dasharray" in violated  # an outline, not a bar
    assert len(re.findall(r'<rect class="bar"', throughput)) == 1 and "✗ 4,100" in throughput


def test_one_outlier_does_not_set_the_latency_axis_and_p95_is_not_the_violated_red():
    runs = [{**run(f"s{i}", 4, 100.0), "claim_latency_ms": {"p50": 1.0, "p95": 2.0, "p99": 3.0, "max": 4.0}}
            for i in range(7)]
    runs.append({**run("slow", 4, 100.0), "claim_latency_ms": {"p50": 350.0, "p95": 700.0, "p99": 1050.0, "max": 1e4}})
    chart = svg.range_chart([r["strategy"] for r in runs], {p: [r["claim_latency_ms"][p] for r in runs]
                                                           for p in ("p50", "p95", "p99")}, "t", "ms")
    assert svg.axis_end([1.0, 2.0, 3.0] * 7 + [350.0, 700.0, 1050.0]) == 3.0
    assert chart.count('class="clipped"') == 1 and "p95 700" in chart  # at the edge, with its values
    ticks = re.findall(r'<text x="[\d.]+" y="[\d.]+" text-anchor="middle">([\d,.]+)</text>', chart)
    assert ticks[-1] == "3"  # the axis ends at the others' scale, not at 1,050
    assert svg.BAD not in chart and "#d62728" not in chart  # p95 in the marks' blue, red means violated


def test_labels_keep_what_tells_runs_apart_whole():
    runs = [{**run("skip-locked", 4, 800.0), "condition": "stale-stats"},
            {**run("skip-locked", 16, 3900.0), "condition": "as-seeded"}]
    from pg_claimcheck.report.html import chart_labels
    assert chart_labels(runs) == ["skip-locked · 4w · stale-stats", "skip-locked · 16w · as-seeded"]
    long = svg._clipped("claim_next_invoice_job_for_the_billing_service_v2 · 16w · generic-plan", 224)
    assert long.endswith("… · 16w · generic-plan")


def test_a_check_report_reads_as_a_check():
    doc = {"tool": {"command": "claimcheck check skip-locked"},
           "runs": [{**run("skip-locked", 4, 800.0), "condition": "stale-stats"},
                    {**run("skip-locked", 16, 3900.0), "condition": "as-seeded"}]}
    page = render(doc)
    assert "<h1>claimcheck check: skip-locked</h1>" in page and "<h2>Throughput per run</h2>" in page
    assert "bench --workers" not in page and "Sweep --workers" not in page
    assert "<polyline" not in page.split('data-chart="throughput"')[1].split("</figure>")[0]  # bars, not a sweep line


def test_the_scoreboard_is_drawn_first_with_a_mark_and_a_line_per_cell_and_follows_the_schema():
    """`bench --scoreboard`'s table (pg_claimcheck.libs.scoreboard.as_dict) in the JSON is drawn above the runs: a row
    per library, each cell its verdict's mark and its line of evidence, a library with a broken cell shaded."""
    from pg_claimcheck.report import validation as report_schema

    board = {"columns": ["1w", "kill", "restart"], "rows": [
        {"library": "saq", "version": "0.26.4", "delivery": "at-least-once", "promise": "p", "cells": {
            "1w": {"verdict": "held", "evidence": "46 jobs/s, pgbench ratio 0.57"},
            "kill": {"verdict": "BROKEN", "evidence": "after-done; 9 run twice"},
            "restart": {"verdict": "not injected", "evidence": "a restart needs <a server> claimcheck started"}}},
        {"library": "huey", "version": "3.5.4", "delivery": "at-most-once", "promise": "p", "cells": {
            "1w": {"verdict": "held", "evidence": "33 jobs/s"}}}]}
    assert not [e for e in report_schema.errors({**DOC, "scoreboard": board}) if "scoreboard" in str(e)]
    page = render({**DOC, "scoreboard": board})
    assert page.index("Scoreboard: each library held to its own promise") < page.index("<h2>Runs</h2>")
    table = page[page.index('<table class="scoreboard">'):]
    table = table[:table.index("</table>")]
    assert table.count("<tr") == 3 and table.count("<tr class=violated>") == 1  # saq's row, which broke
    assert "✗ BROKEN</span><br>after-done; 9 run twice" in table and "- not injected" in table
    assert "a restart needs &lt;a server&gt; claimcheck started" in table  # evidence is escaped
    assert table.count("✓ held") == 2 and "<td class=l>-</td>" in table  # huey has no kill or restart cell
    assert "Scoreboard" not in render(DOC)
