"""The HTML report: one self-contained file next to the JSON, made from the JSON document alone.

Everything is inline (CSS and SVG, no script, no fonts or CDN), so the file opens offline and
can be attached to a ticket or a CI artifact. Charts: throughput against workers per strategy,
double claims per run, lock-wait samples per run by event, and claims over time per worker.
"""
from __future__ import annotations

from html import escape
from pathlib import Path

from claimcheck import svg
from claimcheck.redaction import scrub_all

TIMELINES_SHOWN = 4
"""Per-worker timelines beyond the first are folded away; past this many runs they are left out."""
LOCK_PREFIX = "Lock/"

_CSS = """
body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 6px}
.meta{color:#666;font-size:13px}figure{margin:8px 0 20px}figcaption{font-size:13px;color:#555;margin-top:2px}
table{border-collapse:collapse;font-size:12px}th,td{padding:3px 8px;border-bottom:1px solid #ddd;text-align:right}
th{background:#f4f4f4}td.l,th.l{text-align:left}.ok{color:#18794e;font-weight:600}.bad{color:#c62828;font-weight:600}
details{margin:6px 0}summary{cursor:pointer;font-size:13px}
"""


def run_label(run: dict, *, workers: bool = True) -> str:
    """`skip-locked · lease · b10 · 8w`: what tells runs of one report apart."""
    parts = [run["strategy"], run["mode"], f"b{run['batch']}"]
    return " · ".join(parts + ([f"{run['workers']}w"] if workers else []))


def throughput_series(runs: list[dict]) -> dict[str, list[tuple[float, float]]]:
    series: dict[str, list[tuple[float, float]]] = {}
    for run in runs:
        series.setdefault(run_label(run, workers=False), []).append(
            (float(run["workers"]), float(run["throughput_jobs_per_s"])))
    return series


def lock_wait_stacks(runs: list[dict]) -> dict[str, list[float]]:
    """Samples per `Lock/*` wait event, one list entry per run (zeros where a run had none)."""
    events = sorted({e for run in runs for e in run.get("wait_events", {}) if e.startswith(LOCK_PREFIX)})
    return {e: [float(run.get("wait_events", {}).get(e, 0)) for run in runs] for e in events} or \
        {"no lock waits sampled": [0.0] * len(runs)}


def _figure(name: str, chart: str, caption: str) -> str:
    return f'<figure class="chart" data-chart="{name}">{chart}<figcaption>{escape(caption)}</figcaption></figure>'


def _throughput_figure(runs: list[dict], labels: list[str]) -> str:
    """Lines over the worker counts of a sweep; one bar per run when every run had the same count
    (a column of dots in ten recycled colours would not say which is which)."""
    caption = "Jobs done per second, from the first claim to the last worker's end"
    if len({r["workers"] for r in runs}) > 1:
        chart = svg.line_chart(throughput_series(runs), "throughput against workers", "workers", "jobs done per second")
        return _figure("throughput", chart, caption + ", per strategy · mode · batch.")
    chart = svg.bar_chart(labels, {"jobs/s": [float(r["throughput_jobs_per_s"]) for r in runs]},
                          "throughput per run", "jobs done per second")
    return _figure("throughput", chart, caption + ". Sweep --workers (e.g. 1,2,4,8,16) to see it against workers.")


def _summary_table(runs: list[dict]) -> str:
    heads = ("strategy", "mode", "batch", "workers", "claims", "double claimed", "unclaimed", "done", "jobs/s",
             "pgbench jobs/s", "ratio", "claim p95 ms", "verdict")
    rows = []
    for run in runs:
        verdict = '<span class="ok">exactly-once</span>' if run["exactly_once"] else '<span class="bad">VIOLATED</span>'
        ratio = run.get("pgbench_ratio")
        cells = (escape(run["strategy"]), escape(run["mode"]), run["batch"], run["workers"], f"{run['claims']:,}",
                 f"{run['double_claimed_jobs']:,}", f"{run['unclaimed_jobs']:,}", f"{run['jobs_done']:,}",
                 f"{run['throughput_jobs_per_s']:,.0f}",
                 "-" if run.get("pgbench_jobs_per_s") is None else f"{run['pgbench_jobs_per_s']:,.0f}",
                 "-" if ratio is None else f"{ratio:.2f}",
                 "-" if run["claim_latency_ms"].get("p95") is None else f"{run['claim_latency_ms']['p95']:.2f}",
                 verdict)
        rows.append("<tr>" + "".join(f'<td{" class=l" if i in (0, 1, 12) else ""}>{c}</td>'
                                     for i, c in enumerate(cells)) + "</tr>")
    head = "".join(f'<th{" class=l" if i in (0, 1, 12) else ""}>{h}</th>' for i, h in enumerate(heads))
    return f'<table class="runs"><tr>{head}</tr>{"".join(rows)}</table>'


def _timelines(runs: list[dict]) -> str:
    """The busiest run open (most workers, then most claims), the others folded."""
    with_data = [r for r in runs if r.get("claims_over_time", {}).get("workers")]
    if not with_data:
        return "<p>No per-worker timeline in this report.</p>"
    ordered = sorted(with_data, key=lambda r: (-r["workers"], -r["claims"]))[:TIMELINES_SHOWN]
    parts = []
    for i, run in enumerate(ordered):
        timeline = run["claims_over_time"]
        chart = svg.heatmap(timeline["workers"], timeline["bucket_s"], f"claims over time: {run_label(run)}")
        figure = _figure("claims-over-time", chart, f"{run_label(run)}: claims per worker per time bucket. "
                         "Gaps are a worker waiting (on a lock, a retry back-off, or the CPU).")
        parts.append(f'<details{" open" if i == 0 else ""}><summary>{escape(run_label(run))} '
                     f'({run["claims"]:,} claims in {run["elapsed_s"]:.2f} s)</summary>{figure}</details>')
    return "".join(parts)


def render(doc: dict) -> str:
    """The whole report as one HTML string."""
    runs = doc.get("runs", [])
    pg, tool = doc.get("postgres", {}), doc.get("tool", {})
    labels = [run_label(r) for r in runs]
    body = [
        f"<h1>claimcheck report</h1><p class=meta>PostgreSQL {escape(str(pg.get('version', '?')))} "
        f"({escape(str(pg.get('source', '?')))}) · {escape(str(doc.get('created_at', '')))} · "
        f"<code>{escape(str(tool.get('command', '')))}</code></p>",
        "<h2>Runs</h2>", _summary_table(runs),
        "<h2>Throughput against workers</h2>", _throughput_figure(runs, labels),
        "<h2>Double claims</h2>",
        _figure("double-claims", svg.bar_chart(labels, {"jobs claimed twice or more": [
            float(r["double_claimed_jobs"]) for r in runs]}, "double claims per run", "jobs handed to more than one worker"),
                "Jobs handed to more than one worker. Any bar here is a broken queue."),
        "<h2>Lock waits</h2>",
        _figure("lock-waits", svg.bar_chart(labels, lock_wait_stacks(runs), "lock-wait samples per run",
                                            "pg_stat_activity samples of a worker waiting on a lock", legend=True),
                "Workers seen waiting on a Lock/* event, summed over the sampler's snapshots; split by event."),
        "<h2>Claims over time, per worker</h2>", _timelines(runs),
    ]
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>claimcheck report</title>'
            f'<style>{_CSS}</style></head><body>{"".join(body)}</body></html>\n')


def write_html(doc: dict, json_path: Path) -> Path:
    """Write the report next to the JSON file, same name, `.html`."""
    path = json_path.with_suffix(".html")
    path.write_text(render(scrub_all(doc)), encoding="utf-8")
    return path
