"""The HTML report as a person sees it: laid out by headless Chromium at 1400 and 420 px (a phone).

A copy of the page gets a small script (the report itself has none) that measures, after layout,
whatever sticks out: the page wider than the window, a chart wider than the window, a chart's text
(axis labels, legends) outside its drawing, the table's verdict column off screen. Chromium prints
the measured DOM (`--dump-dom`); screenshots are saved next to it for a person to look at
(their paths are listed under "claimcheck figures"). Skipped, saying why, where Chromium is absent
(`.ci/run` installs Debian's `chromium` when it can).
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from html import escape
from pathlib import Path

import pytest

from pg_claimcheck.report.html import render
from sample_reports import report, run_object

BROWSER = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
WIDTHS_PX = (1400, 420)
BROWSER_TIMEOUT_S = 60
SMALLEST_WINDOW_PX = 500
"""Headless Chromium's window is never narrower: a narrower width is a frame of that width inside it."""
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run", "--disable-sync", "--hide-scrollbars")

MEASURE = """<script>
addEventListener('load', () => {
  const W = innerWidth, out = {width: W, page: document.documentElement.scrollWidth, problems: []};
  document.querySelectorAll('svg').forEach((svg, i) => {
    const box = svg.getBoundingClientRect();
    if (box.right > W + 1) out.problems.push(`chart ${i} ends at ${Math.round(box.right)} px`);
    svg.querySelectorAll('text').forEach(t => {
      const r = t.getBoundingClientRect();
      if (r.width && (r.right > box.right + 1 || r.left < box.left - 1))
        out.problems.push(`chart ${i}: "${t.textContent.slice(0, 40)}" cut off`);
    });
  });
  document.querySelectorAll('th').forEach(th => {
    if (th.textContent === 'verdict' && th.getBoundingClientRect().right > W)
      out.problems.push('verdict column off screen');
  });
  if (out.page > W) out.problems.push(`page is ${out.page} px wide`);
  // In a frame (a window narrower than Chromium's smallest), the page the browser dumps is the parent.
  const top = parent === window ? document : parent.document;
  const pre = top.createElement('pre'); pre.id = 'measured'; pre.textContent = JSON.stringify(out);
  top.body.appendChild(pre);
});
</script>"""

pytestmark = pytest.mark.skipif(BROWSER is None, reason="no Chromium on this machine (apt-get install chromium); "
                                                         "the report's layout was not checked in a browser")


def sweep() -> dict:
    """A sweep like `bench --workers 1,2,4` of a safe and an unsafe strategy, both modes, with repetitions."""
    runs = []
    for strategy, mode in (("skip-locked", "lease"), ("skip-locked", "lock"), ("naive-subquery", "lease"),
                           ("naive-subquery", "lock"), ("for-update", "lease"), ("for-update", "lock")):
        for workers in (1, 2, 4):
            bad = strategy == "naive-subquery" and workers > 1
            rate = {"skip-locked": 700, "for-update": 450, "naive-subquery": 900}[strategy] * workers
            runs.append(run_object(strategy, workers, ok=not bad, mode=mode, rates=[rate * 0.9, rate, rate * 1.1],
                                   wait_events={"Lock/transactionid": 30 * workers, "Lock/tuple": 4} if
                                   strategy == "for-update" else {},
                                   claims_over_time={"bucket_s": 0.01, "workers": {
                                       f"w{i:02d}": [1, 0, 3, 2] for i in range(workers)}}))
    return report(*runs)


def long_names() -> dict:
    """A user's file with a long name, violated, swept: labels and legends must be shortened, not cut."""
    name = "claim_next_invoice_job_for_the_billing_service_v2_with_retries"
    return report(*(run_object(name, w, ok=w < 4, rates=[100.0 * w]) for w in (1, 2, 4)),
                  run_object("skip-locked", 4, wait_events={"Lock/transactionid": 3, "LWLock/BufferContent": 2}))


def rate_sweep() -> dict:
    """`bench --rate 200,500,1000` of two strategies: the knees, and each run's queue and latency over time."""
    runs, knees = [], []
    for strategy in ("skip-locked", "for-update"):
        points = []
        for rate in (200.0, 500.0, 1000.0):
            p99 = rate / (10 if strategy == "skip-locked" else 4)
            t = [i * 0.1 for i in range(120)]
            run = run_object(strategy, 4, rates=[rate])
            run.update({"offered_rate_per_s": rate, "achieved_rate_per_s": rate * 0.99, "producer_kept_up": True,
                        "pickup_latency_ms": {"count": 10, "p50": p99 / 3, "p95": p99, "p99": p99, "max": p99 * 2},
                        "queue_over_time": {"interval_s": 0.1, "t_s": t, "queued": [i % 7 for i in range(120)],
                                            "running": [i % 3 for i in range(120)],
                                            "dead_tuples": [i * 40 for i in range(120)],
                                            "table_bytes": [8192 * (1 + i // 10) for i in range(120)],
                                            "vacuums": [0] * 120},
                        "queue_summary": {"samples": 120, "max_depth": 6, "final_depth": 0, "max_dead_tuples": 4760,
                                          "final_dead_tuples": 4760, "max_table_bytes": 98304,
                                          "final_table_bytes": 98304},
                        "latency_over_time": {"bucket_s": 0.1, "t_s": t, "count": [5] * 120,
                                              "p50": [p99 / 3] * 120, "p99": [p99 * (1 + i % 5 / 10) for i in range(120)],
                                              "max": [p99 * 2] * 120}})
            runs.append(run)
            held = p99 <= 100
            points.append({"offered_rate_per_s": rate, "achieved_rate_per_s": rate * 0.99, "pickup_p99_ms": p99,
                           "sustained": held, "shortfalls": [] if held else
                           [f"pickup p99 {p99:,.1f} ms > SLO 100 ms", "producer fell behind (max lag 1,583 ms, "
                            "5,680 of 10,000 enqueued)", "achieved 189 jobs/s, under 95% of offered"]})
        knee = max((p["offered_rate_per_s"] for p in points if p["sustained"]), default=None)
        knees.append({"strategy": strategy, "mode": "lease", "workers": 4, "batch": 10, "latency_slo_ms": 100.0,
                      "knee_rate_per_s": knee, "knee_bounded": True, "summary": f"{knee:,g} jobs/s",
                      "first_unsustained_rate_per_s": None, "rates": points})
    doc = report(*runs)
    doc["knees"] = knees
    return doc


def check() -> dict:
    """A default `check`: planner conditions at 4 workers, the table as seeded at 16, one slow outlier."""
    doc = report(*(run_object("skip-locked", w, rate, condition=c, claim_latency_ms={"p50": 4.0, "p95": p95,
                                                                                        "p99": p95 * 2, "max": 1e3})
                   for w, rate, c, p95 in ((4, 823.0, "stale-stats", 7.0), (4, 1344.0, "generic-plan", 700.0),
                                           (16, 3945.0, "as-seeded", 9.8))))
    doc["tool"]["command"] = "claimcheck check skip-locked"
    return doc


def scoreboard() -> dict:
    """`bench --libs all --scoreboard`: a row per library, a cell per worker count, fault kind and the fed run."""
    columns = ["1w", "4w", "8w", "kill", "terminate", "stall", "restart", "rate"]
    libraries = [("procrastinate", "3.10.0", "at-least-once"), ("saq", "0.26.4", "at-least-once"),
                 ("huey", "3.5.4", "at-most-once"), ("dbos", "3.4.0", "at-least-once"),
                 ("pg-boss-12", "12.38.0", "at-least-once"), ("sidequest", "1.16.4", "at-least-once")]
    rows, runs = [], []
    for name, version, delivery in libraries:
        cells = {c: {"verdict": "held", "evidence": f"{40 * (i + 1)} jobs/s, pgbench ratio 0.{i + 2}1"}
                 for i, c in enumerate(columns[:3])}
        cells.update({c: {"verdict": "held", "evidence": "2 redelivered, 0 failed"} for c in columns[3:7]})
        cells["rate"] = {"verdict": "held", "evidence": "60 fed, pickup p99 1,760 ms"}
        if name == "saq":
            cells["kill"] = {"verdict": "BROKEN", "evidence": "after-done; 3 run twice"}
        if name == "dbos":
            cells["restart"] = {"verdict": "not injected", "evidence": "a restart needs a server claimcheck started"}
        rows.append({"library": name, "version": version, "delivery": delivery, "promise": "", "cells": cells})
        runs += [run_object(name, w, ok=not (name == "saq"), rates=[40.0 * w]) for w in (1, 4, 8)]
    doc = report(*runs)
    doc["scoreboard"] = {"columns": columns, "rows": rows}
    return doc


DOCUMENTS = {"sweep": sweep, "long names": long_names, "rate sweep": rate_sweep, "check": check,
             "scoreboard": scoreboard}


def measure(page: str, width: int, scratch: Path) -> tuple[dict, Path]:
    html = scratch / f"report-{width}.html"
    measured = page.replace("</body>", MEASURE + "</body>")
    if width < SMALLEST_WINDOW_PX:  # a same-origin frame (srcdoc) of the width, whose script reports to its parent
        measured = (f'<!DOCTYPE html><html><body style="margin:0"><iframe style="width:{width}px;height:1960px;'
                    f'border:0" srcdoc="{escape(measured, quote=True)}"></iframe></body></html>')
    html.write_text(measured, encoding="utf-8")
    shot = scratch / f"report-{width}.png"
    base = [BROWSER, *FLAGS, f"--window-size={max(width, SMALLEST_WINDOW_PX)},2000", "--virtual-time-budget=3000"]
    runs = []
    for extra in (["--dump-dom"], [f"--screenshot={shot}"]):
        profile = tempfile.mkdtemp(prefix="cc-chromium-")  # a fresh profile each time: nothing carried over
        try:
            runs.append(subprocess.run([*base, f"--user-data-dir={profile}", *extra, html.as_uri()],
                                       capture_output=True, text=True, timeout=BROWSER_TIMEOUT_S))
        finally:
            shutil.rmtree(profile, ignore_errors=True)
    found = re.search(r'<pre id="measured">(.*?)</pre>', runs[0].stdout)
    assert found, f"Chromium printed no measurement: {runs[0].stderr[-500:]}"
    return json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&")), shot


@pytest.mark.parametrize("document", DOCUMENTS)
@pytest.mark.parametrize("width", WIDTHS_PX)
def test_report_fits_the_window_in_chromium(width, document, record_property, tmp_path):
    # pytest's tmp_path keeps the screenshot to look at (its last three runs), then removes it:
    # a folder of tempfile's own stayed in /tmp after every run.
    measured, shot = measure(render(DOCUMENTS[document]()), width, tmp_path)
    record_property(f"report screenshot ({document}) at {width} px", str(shot))
    assert measured["width"] == width
    assert measured["problems"] == [], measured["problems"][:10]
    assert shot.exists() and shot.stat().st_size > 10_000
