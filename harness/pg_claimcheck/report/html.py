"""The HTML report: one self-contained file next to the JSON, made from the JSON document alone.

It answers "which strategy should I use, and why" first: a conclusion (which runs held
exactly-once, the fastest that held per mode, what the others cost), then the table and the
charts behind it: throughput against workers, double claims, claim latency p50/p95/p99, time
spent waiting on locks, and claims over time per worker. A violated run is marked (red, ✗) in
every chart, because its speed does not count. A report with rate runs (`check --rate`, `bench
--rate`) also shows each setting's knee (pickup p99 against the offered rate, the SLO dashed) and
each rate run's queue depth, pickup latency and dead tuples over time.

Everything is inline (CSS and SVG, no script, no fonts or CDN), so the file opens offline and
can be attached to a ticket or a CI artifact. Charts scale with the window (checked in headless
Chromium at 1400 and 420 px by the tests).
"""
from __future__ import annotations

from html import escape
from pathlib import Path

from pg_claimcheck.engine.sampler import SAMPLE_INTERVAL_S
from pg_claimcheck.report import svg
from pg_claimcheck.report.conclusion import as_html, conclude
from pg_claimcheck.report.render import size_words, write_whole
from pg_claimcheck.server.pooling import pooler_words
from pg_claimcheck.server.redaction import scrub_all
from pg_claimcheck.verdict.liveness import HELD, WORDS, run_outcome

TIMELINES_SHOWN = 4
RATE_RUNS_SHOWN = 24
"""Rate runs whose queue and latency over time are charted (the first open, the rest folded)."""
"""Per-worker timelines beyond the first are folded away; past this many runs they are left out."""
LOCK_PREFIX = "Lock/"
"""The sampler's interval, for reports written before `wait_sample_interval_s` was recorded."""

_CSS = """
body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 6px}
.meta{color:#666;font-size:13px;overflow-wrap:anywhere}figure{margin:8px 0 20px}
figcaption{font-size:13px;color:#555;margin-top:2px}
.conclusion{overflow-wrap:anywhere;border:1px solid #ddd;border-left:4px solid #18794e;background:#f7fbf8;padding:8px 14px;font-size:14px}
.conclusion.none{border-left-color:#c62828;background:#fdf6f6}.conclusion li{margin:3px 0}
.scroll{overflow-x:auto}
table{border-collapse:collapse;font-size:12px}th,td{padding:3px 8px;border-bottom:1px solid #ddd;text-align:right}
th{background:#f4f4f4}td.l,th.l{text-align:left}.ok{color:#18794e;font-weight:600}.bad{color:#c62828;font-weight:600}
tr.violated td{background:#fdf0f0}.ok,.bad{white-space:nowrap}td.name{max-width:16em;overflow-wrap:break-word}
details{margin:6px 0}summary{cursor:pointer;font-size:13px}
.na{color:#777;white-space:nowrap}table.scoreboard td{vertical-align:top;min-width:8em}td.cell{font-size:12px}
@media (max-width:900px){body{margin:12px}th,td{padding:2px 4px}}
"""


def run_label(run: dict, *, workers: bool = True) -> str:
    """`skip-locked · lease · b10 · 8w`: what tells runs of one report apart."""
    parts = [run["strategy"], run["mode"], f"b{run['batch']}"]
    condition = [f"under {run['condition']}"] if run.get("condition") else []
    return " · ".join(parts + ([f"{run['workers']}w"] if workers else []) + condition)


def chart_labels(runs: list[dict]) -> list[str]:
    """Each run's label in the charts: its strategy, and of mode, batch, workers and planner condition
    only what tells it from the report's other runs (what all share is in the table), so a label fits
    its column whole instead of being cut mid-name."""
    parts = [(r["strategy"], r["mode"], f"b{r['batch']}", f"{r['workers']}w",
              r.get("condition") or "") for r in runs]
    varying = [i for i in range(1, 5) if len({p[i] for p in parts}) > 1]
    return [" · ".join([p[0], *(p[i] for i in varying if p[i])]) for p in parts]


def report_verb(doc: dict) -> str:
    """The verb that wrote the report (`bench`, `check`, `lib`, ...), from its command line."""
    words = str(doc.get("tool", {}).get("command", "")).split()
    return words[1] if len(words) > 1 and words[0].endswith("claimcheck") else "bench"


def throughput_series(runs: list[dict]) -> dict[str, list[tuple[float, float]]]:
    series: dict[str, list[tuple[float, float]]] = {}
    for run in runs:
        series.setdefault(run_label(run, workers=False), []).append(
            (float(run["workers"]), float(run["throughput_jobs_per_s"])))
    return series


def lock_wait_seconds(runs: list[dict]) -> dict[str, list[float]]:
    """Worker-seconds spent waiting per `Lock/*` wait event, one list entry per run (zeros where a run had
    none): each sample saw a worker waiting, and stands for one sampling interval of it."""
    events = sorted({e for run in runs for e in run.get("wait_events", {}) if e.startswith(LOCK_PREFIX)})
    return {e: [float(run.get("wait_events", {}).get(e, 0)) * run.get("wait_sample_interval_s",
                                                                        SAMPLE_INTERVAL_S)
                for run in runs] for e in events} or {"no lock waits sampled": [0.0] * len(runs)}


def conclusion(runs: list[dict], knees: list[dict] | None = None) -> str:
    """The summary box: what the terminal's last lines say (pg_claimcheck.report.conclusion)."""
    return as_html(conclude(runs, knees))


def _figure(name: str, chart: str, caption: str) -> str:
    return f'<figure class="chart" data-chart="{name}">{chart}<figcaption>{escape(caption)}</figcaption></figure>'


VIOLATED_NOTE = " Runs marked ✗ in red violated exactly-once: their figures do not count."


def _throughput_figure(runs: list[dict], labels: list[str], flagged: list[bool], sweep: bool) -> str:
    """Lines over the worker counts of a sweep; one bar per run when every run had the same count
    (a column of dots in ten recycled colours would not say which is which), or in a check (`sweep`
    false: its planner conditions' short runs on small tables are no sweep). A violated run's bar is
    only an outline: its speed does not count."""
    caption = "Jobs done per second, from the workers' release to the last claim or end of a job"
    if any(len(r.get("repetitions") or ()) > 1 for r in runs):
        caption += " (median of the repetitions)"
    note = VIOLATED_NOTE if any(flagged) else ""
    if sweep and len({r["workers"] for r in runs}) > 1:
        bad = frozenset((run_label(r, workers=False), float(r["workers"])) for r in runs if not r["exactly_once"])
        chart = svg.line_chart(throughput_series(runs), "throughput against workers", "workers", "jobs done per second",
                               flagged=bad)
        return _figure("throughput", chart, caption + ", per strategy · mode · batch." + note)
    chart = svg.bar_chart(labels, {"jobs/s": [float(r["throughput_jobs_per_s"]) for r in runs]},
                          "throughput per run", "jobs done per second", flagged=flagged, hollow_flagged=True)
    hint = " `bench --workers 1,2,4,8,16` shows it against workers." if sweep else ""
    return _figure("throughput", chart, caption + "." + hint + note.replace("marked ✗ in red", "marked ✗ in red, "
                                                                            "drawn as outlines,"))


def _latency_figure(runs: list[dict], labels: list[str], flagged: list[bool]) -> str:
    marks = {p: [r["claim_latency_ms"].get(p) for r in runs] for p in ("p50", "p95", "p99")}
    chart = svg.range_chart(labels, marks, "claim latency per run", "claim latency, ms (p50, p95, p99)", flagged)
    clipped = ' A mark past the axis (▸, with its value) is an outlier the axis leaves out, so the others stay readable.' \
        if 'class="clipped"' in chart else ""
    return _figure("claim-latency", chart, "Time from sending a claim to its commit, per run: half of the claims "
                   "took less than p50, 95 % less than p95, 99 % less than p99." + clipped
                   + (VIOLATED_NOTE if any(flagged) else ""))


def _lock_wait_figure(runs: list[dict], labels: list[str], flagged: list[bool]) -> str:
    chart = svg.bar_chart(labels, lock_wait_seconds(runs), "time waiting on locks per run",
                          "worker-seconds spent waiting on a lock", legend=True, flagged=flagged, total_format=",.2f")
    return _figure("lock-waits", chart, "Seconds workers spent waiting on a Lock/* event, summed over workers and "
                   "split by event; estimated from pg_stat_activity samples (each sample of a waiting worker counts "
                   "for one sampling interval).")


def verdict_mark(run: dict) -> str:
    """A run's outcome, marked: `✗ NO PROGRESS` (liveness, schema 4) is no `✗ VIOLATED` (safety)."""
    outcome = run_outcome(run)
    return (f'<span class="ok">{WORDS[HELD]}</span>' if outcome == HELD
            else f'<span class="bad">✗ {WORDS[outcome]}</span>')


COLUMNS = (
    ("strategy", "l", lambda r: escape(r["strategy"])),
    ("verdict", "l", verdict_mark),
    ("mode", "l", lambda r: escape(r["mode"])),
    ("batch", "", lambda r: r["batch"]),
    ("workers", "", lambda r: r["workers"]),
    ("claims", "", lambda r: f"{r['claims']:,}"),
    ("double claimed", "", lambda r: f"{r['double_claimed_jobs']:,}"),
    ("unclaimed", "", lambda r: f"{r['unclaimed_jobs']:,}"),
    ("done", "", lambda r: f"{r['jobs_done']:,}"),
    ("jobs/s", "", lambda r: f"{r['throughput_jobs_per_s']:,.0f}"),
    ("spread", "", lambda r: None if len(r.get("repetitions") or ()) < 2 else
     f"{r['throughput']['min']:,.0f}–{r['throughput']['max']:,.0f} (n={r['throughput']['n']})"),
    ("pgbench jobs/s", "", lambda r: None if r.get("pgbench_jobs_per_s") is None else f"{r['pgbench_jobs_per_s']:,.0f}"),
    ("ratio", "", lambda r: None if r.get("pgbench_ratio") is None else f"{r['pgbench_ratio']:.2f}"),
    ("claim p95 ms", "", lambda r: None if r["claim_latency_ms"].get("p95") is None
     else f"{r['claim_latency_ms']['p95']:.2f}"),
    ("offered / achieved jobs/s", "", lambda r: None if r.get("offered_rate_per_s") is None else
     f"{r['offered_rate_per_s']:,g} / {r['achieved_rate_per_s']:,.0f}"
     + ("" if r.get("producer_kept_up", True) else ' <span class="bad">behind</span>')),
    ("pickup p99 ms", "", lambda r: None if (r.get("pickup_latency_ms") or {}).get("p99") is None
     else f"{r['pickup_latency_ms']['p99']:,.1f}"),
    ("max depth", "", lambda r: _queue(r, "max_depth")),
    ("dead tuples final / max", "", lambda r: None if _queue(r, "max_dead_tuples") is None else
     f"{_queue(r, 'final_dead_tuples')} / {_queue(r, 'max_dead_tuples')}"),
    ("max table", "", lambda r: None if _queue(r, "max_table_bytes") is None
     else size_words(r["queue_summary"]["max_table_bytes"])),
)
"""The table's columns: heading, alignment, cell (None = nothing to show). A column with nothing to
show in any run (pgbench when not run, spread without --repeat) is left out."""


def _queue(run: dict, key: str) -> str | None:
    value = (run.get("queue_summary") or {}).get(key)
    return None if value is None else f"{value:,}"


_CELL_CLASS = (' class="l name"', " class=l")


def _summary_table(runs: list[dict]) -> str:
    cells = [[cell(run) for _, _, cell in COLUMNS] for run in runs]
    shown = [i for i in range(len(COLUMNS)) if any(row[i] is not None for row in cells)]
    head = "".join(f'<th{" class=l" if COLUMNS[i][1] else ""}>{COLUMNS[i][0]}</th>' for i in shown)
    rows = []
    for run, row in zip(runs, cells):
        # A long strategy name (a user's file) wraps; the verdict next to it never does.
        tds = "".join(f'<td{_CELL_CLASS[0] if i == 0 else _CELL_CLASS[1] if COLUMNS[i][1] else ""}>'
                      f'{"-" if row[i] is None else row[i]}</td>' for i in shown)
        rows.append(f'<tr{"" if run["exactly_once"] else " class=violated"}>{tds}</tr>')
    return f'<div class="scroll"><table class="runs"><tr>{head}</tr>{"".join(rows)}</table></div>'


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
        mark = "" if run["exactly_once"] else verdict_mark(run) + " "
        parts.append(f'<details{" open" if i == 0 else ""}><summary>{mark}{escape(run_label(run))} '
                     f'({run["claims"]:,} claims in {run["elapsed_s"]:.2f} s)</summary>{figure}</details>')
    return "".join(parts)


def _conditions(conditions: list[dict], runs: list[dict]) -> str:
    """Each planner condition tried (`check --plans`): its plan's shape, verdict, the claims of its run that
    overlapped another and its evidence, the plan itself folded."""
    overlaps = {r["condition"]: f'{r["power"]["overlapping_claims"]:,} of {r["power"]["claims"]:,}'
                for r in runs if r.get("condition") and r.get("power")}
    rows = []
    for c in conditions:
        verdict = {"held": '<span class="ok">held</span>', "VIOLATED": '<span class="bad">✗ VIOLATED</span>'}.get(
            c["verdict"], escape(c["verdict"] + (f" (plan of {c['same_as']})" if c.get("same_as") else "")))
        how = "; ".join(c["rescanned_limit"] + c["limit_loops"]) or (
            "no row lock: two workers can pick the same rows" if c.get("row_lock") is False and not c.get("opaque")
            else "the limiting subquery runs once" if c["plan"] else "-")
        plan = (f'<details><summary>plan</summary><pre>{escape(chr(10).join(c["plan"]))}</pre></details>'
                if c["plan"] else "")
        notes = "<br>".join(escape(x) for x in c["evidence"] + ([c["note"]] if c.get("note") else []))
        advice = f'<br><b>Fix:</b> {escape(c["advice"])}' if c.get("advice") and c["verdict"] == "VIOLATED" else ""
        rows.append(f'<tr{" class=violated" if c["verdict"] == "VIOLATED" else ""}><td class=l>{escape(c["condition"])}'
                    f'</td><td class=l>{escape(c["summary"])}</td><td class=l>{escape(how)}{plan}</td>'
                    f'<td class=l>{verdict}</td><td>{escape(overlaps.get(c["condition"], "-"))}</td>'
                    f'<td class=l>{notes}{advice}</td></tr>')
    head = "".join(f"<th class=l>{h}</th>" for h in ("condition", "what the planner sees", "plan", "verdict",
                                                      "overlapping claims", "evidence"))
    return f'<div class="scroll"><table class="conditions"><tr>{head}</tr>{"".join(rows)}</table></div>'


def _power(power: dict | None) -> str:
    """How hard the runs looked together (pg_claimcheck.verdict.power), and what they could not have seen."""
    if not power:
        return ""
    unseen = "".join(f"<li>{escape(line)}</li>" for line in power.get("unseen", []))
    return (f'<p class=meta><b>Power:</b> {escape(power["statement"])}</p>'
            + (f"<p><b>Not seen:</b></p><ul>{unseen}</ul>" if unseen else ""))


def _knees(knees: list[dict], runs: list[dict]) -> str:
    """Each setting's knee: a table (its pickup p99 at each rate, ✓ sustained or ✗ not, why the first not)
    and pickup p99 against the offered rate, the SLO dashed."""
    rates = sorted({p["offered_rate_per_s"] for k in knees for p in k["rates"]})
    slo = knees[0]["latency_slo_ms"]
    head = "".join(f"<th{' class=l' if h in ('strategy', 'mode', 'knee', 'why') else ''}>{h}</th>" for h in (
        "strategy", "mode", "batch", "workers", "knee", *(f"{r:,g}/s p99 ms" for r in rates), "why"))
    rows = []
    for k in knees:
        by_rate = {p["offered_rate_per_s"]: p for p in k["rates"]}
        cells = "".join("<td>-</td>" if r not in by_rate else _rate_cell(by_rate[r]) for r in rates)
        first = next((p for p in k["rates"] if not p["sustained"]), None)
        why = "-" if first is None else f'{first["offered_rate_per_s"]:,g}/s: {"; ".join(first["shortfalls"])}'
        rows.append(f'<tr><td class="l name">{escape(k["strategy"])}</td><td class=l>{escape(k["mode"])}</td>'
                    f'<td>{k["batch"]}</td><td>{k["workers"]}</td><td class=l><b>{escape(k["summary"])}</b></td>'
                    f'{cells}<td class=l>{escape(why)}</td></tr>')
    table = f'<div class="scroll"><table class="knees"><tr>{head}</tr>{"".join(rows)}</table></div>'
    series: dict[str, list[tuple[float, float]]] = {}
    bad = set()
    for r in runs:
        p99 = (r.get("pickup_latency_ms") or {}).get("p99")
        if r.get("offered_rate_per_s") is not None and p99 is not None:
            name = run_label(r)
            series.setdefault(name, []).append((float(r["offered_rate_per_s"]), float(p99)))
            if not r["exactly_once"]:
                bad.add((name, float(r["offered_rate_per_s"])))
    chart = svg.line_chart(series, "pickup latency p99 against offered rate", "offered rate, jobs/s",
                           "pickup latency p99, ms", flagged=frozenset(bad), reference=("SLO", float(slo)))
    caption = (f"A rate is sustained when exactly-once held, the run drained, the producer kept up with its schedule, "
               f"it achieved at least 95 % of the offered rate and the pickup latency's p99 (from each job's scheduled "
               f"enqueue to its claim's commit) was at most the SLO, {slo:g} ms. The knee is the highest rate that it "
               "and every lower rate swept sustained (docs/producers.md).")
    return table + _figure("knees", chart, caption + (VIOLATED_NOTE if bad else ""))


def _rate_cell(point: dict) -> str:
    p99 = point["pickup_p99_ms"]
    mark = "<span class=ok>✓</span>" if point["sustained"] else "<span class=bad>✗</span>"
    return f"<td>{'-' if p99 is None else f'{p99:,.1f}'} {mark}</td>"


def _over_time(runs: list[dict], slo: float | None) -> str:
    """Each rate run's queue depth, pickup latency and dead tuples over time: the first open, the others folded."""
    rated = [r for r in runs if r.get("queue_over_time")][:RATE_RUNS_SHOWN]
    parts = []
    for i, run in enumerate(rated):
        q, lat = run["queue_over_time"], run.get("latency_over_time") or {}
        label = f"{run_label(run)} at {run['offered_rate_per_s']:,g} jobs/s"
        until = max(q["t_s"] + lat.get("t_s", []), default=0.0)
        depth = svg.time_chart({"queued": list(zip(q["t_s"], q["queued"])), "running": list(zip(q["t_s"], q["running"]))},
                               f"queue depth over time: {label}", "jobs", until_s=until)
        latency = svg.time_chart({name: list(zip(lat.get("t_s", []), lat.get(name, []))) for name in ("p99", "p50")},
                                 f"pickup latency over time: {label}", "pickup latency, ms",
                                 reference=None if slo is None else ("SLO", slo), until_s=until)
        dead = svg.time_chart({"dead tuples": list(zip(q["t_s"], q["dead_tuples"]))}, f"dead tuples over time: {label}",
                              "dead tuples", until_s=until)
        summary, p99 = run.get("queue_summary") or {}, (run.get("pickup_latency_ms") or {}).get("p99")
        figures = (_figure("depth-over-time", depth, f"Jobs queued (not yet claimed) and running (claimed, not "
                           f"finished) in the jobs table, sampled every {q['interval_s']:g} s from the run's start and "
                           "once after the drain. In lock mode a claimed job shows as queued until its transaction "
                           "commits it done.")
                   + _figure("latency-over-time", latency, f"Pickup latency per {lat.get('bucket_s', 0):g} s interval: "
                             "from each produced job's scheduled enqueue time to its claim's commit, over the claims "
                             "committed in that interval (nearest-rank p50 and p99; a gap is an interval without one)."
                             + ("" if slo is None else " The SLO is dashed."))
                   + _figure("dead-tuples-over-time", dead, "Dead tuples in the jobs table as the statistics system "
                             "counts them (each backend reports within about a second; a vacuum lowers them); the "
                             f"table with its indexes reached {size_words(summary.get('max_table_bytes'))}."))
        mark = "" if run["exactly_once"] else verdict_mark(run) + " "
        parts.append(f'<details{" open" if i == 0 else ""}><summary>{mark}{escape(label)} (max depth '
                     f'{summary.get("max_depth", "-")}, pickup p99 {"-" if p99 is None else f"{p99:,.1f}"} ms)'
                     f'</summary>{figures}</details>')
    shown = len([r for r in runs if r.get("queue_over_time")])
    if shown > RATE_RUNS_SHOWN:
        parts.append(f"<p>{shown - RATE_RUNS_SHOWN} more rate run(s) are in the JSON, not charted here.</p>")
    return "".join(parts)


def _pooler(pooler: dict | None) -> str:
    """The header's words for the pooler the workers went through, if any."""
    return escape(f", workers through {pooler_words(pooler)}") if pooler else ""


SCOREBOARD_MARKS = {"held": ('ok', "✓ held"), "BROKEN": ('bad', "✗ BROKEN"), "not injected": ("na", "- not injected")}
"""A scoreboard cell's verdict (pg_claimcheck.libs.scoreboard) -> its class and mark."""


def _scoreboard(board: dict) -> str:
    """`bench --scoreboard`: one row per library, each column's verdict by its own promise and one line of evidence
    (the runs behind each cell are in the Runs table below)."""
    head = "".join(f"<th class=l>{escape(c)}</th>" for c in board["columns"])
    rows = []
    for row in board["rows"]:
        tds = []
        for column in board["columns"]:
            got = row["cells"].get(column)
            if got is None:
                tds.append("<td class=l>-</td>")
                continue
            kind, mark = SCOREBOARD_MARKS.get(got["verdict"], ("bad", escape(got["verdict"])))
            tds.append(f'<td class="l cell"><span class="{kind}">{mark}</span><br>{escape(got["evidence"])}</td>')
        broken = any(c["verdict"] == "BROKEN" for c in row["cells"].values())
        name = (f'<td class="l name"><b>{escape(row["library"])}</b> {escape(row["version"])}'
                f'<br><span class=meta>{escape(row["delivery"])}</span></td>')
        rows.append(f'<tr{" class=violated" if broken else ""}>{name}{"".join(tds)}</tr>')
    return (f'<div class="scroll"><table class="scoreboard"><tr><th class=l>library (its promise)</th>{head}</tr>'
            f'{"".join(rows)}</table></div>')


def _subject(runs: list[dict], verb: str) -> str:
    """What a check checked, in its heading (a bench's many strategies are in its table)."""
    names = sorted({r["strategy"] for r in runs})
    return f": {escape(names[0])}" if verb == "check" and len(names) == 1 else ""


def render(doc: dict) -> str:
    """The whole report as one HTML string."""
    runs = doc.get("runs", [])
    pg, tool = doc.get("postgres", {}), doc.get("tool", {})
    labels = chart_labels(runs)
    flagged = [not r["exactly_once"] for r in runs]
    verb = report_verb(doc)
    sweep = verb != "check"
    slo = doc["knees"][0]["latency_slo_ms"] if doc.get("knees") else None
    body = [
        f"<h1>claimcheck {escape(verb)}{_subject(runs, verb)}</h1><p class=meta>PostgreSQL {escape(str(pg.get('version', '?')))} "
        f"({escape(str(pg.get('source', '?')))}){_pooler(pg.get('pooler'))} · {escape(str(doc.get('created_at', '')))} · "
        f"<code>{escape(str(tool.get('command', '')))}</code></p>",
        conclusion(runs, doc.get("knees")), _power(doc.get("power")),
        *(["<h2>Scoreboard: each library held to its own promise</h2>", _scoreboard(doc["scoreboard"])]
          if doc.get("scoreboard") else []),
        "<h2>Runs</h2>", _summary_table(runs),
        *(["<h2>Knees: the highest offered rate sustained</h2>", _knees(doc["knees"], runs)] if doc.get("knees") else []),
        *(["<h2>Queue depth and latency over time</h2>", _over_time(runs, slo)]
          if any(r.get("queue_over_time") for r in runs) else []),
        *(["<h2>Planner conditions</h2>", _conditions(doc["conditions"], runs)] if doc.get("conditions") else []),
        "<h2>Throughput against workers</h2>" if sweep else "<h2>Throughput per run</h2>",
        _throughput_figure(runs, labels, flagged, sweep),
        "<h2>Double claims</h2>",
        _figure("double-claims", svg.bar_chart(labels, {"jobs claimed twice or more": [
            float(r["double_claimed_jobs"]) for r in runs]}, "double claims per run", "jobs handed to more than one worker",
            flagged=flagged), "Jobs handed to more than one worker. Any bar here is a broken queue."
                + (VIOLATED_NOTE if any(flagged) else "")),
        "<h2>Claim latency</h2>", _latency_figure(runs, labels, flagged),
        "<h2>Lock waits</h2>", _lock_wait_figure(runs, labels, flagged),
        "<h2>Claims over time, per worker</h2>", _timelines(runs),
    ]
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>claimcheck report</title>'
            f'<style>{_CSS}</style></head><body>{"".join(body)}</body></html>\n')


def write_html(doc: dict, json_path: Path) -> Path:
    """Write the report next to the JSON file, same name, `.html`."""
    path = json_path.with_suffix(".html")
    write_whole(path, render(scrub_all(doc)))
    return path
