"""The HTML report of `claimcheck idle` and `claimcheck lib NAME --idle`: the comparison table and a timeline of
each design's activity as the compute's monitor saw it, one row per design, coloured by cause, made from the
JSON document alone (inline SVG, no script) like pg_claimcheck.report.html."""
from __future__ import annotations

from html import escape
from pathlib import Path

from pg_claimcheck.report import svg
from pg_claimcheck.report.render import write_whole
from pg_claimcheck.server.redaction import scrub_all

ROW_PX = 26
LABEL_PX = 220
PLOT_PX = 560
LEGEND_PX = 150
_CSS = ("body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1100px}h1{font-size:20px}"
        "h2{font-size:16px;margin-top:24px}.meta{color:#666;font-size:13px;overflow-wrap:anywhere}"
        "table{border-collapse:collapse;font-size:12px}th,td{padding:3px 8px;border-bottom:1px solid #ddd;"
        "text-align:right}th{background:#f4f4f4}td.l,th.l{text-align:left}.ok{color:#18794e;font-weight:600}"
        ".bad{color:#c62828;font-weight:600}figcaption{font-size:13px;color:#555}")


def timeline_svg(rows: list[dict]) -> str:
    """Each design's activity over its window: a mark per moment, its colour the cause."""
    causes = list(dict.fromkeys(e["cause"] for r in rows for e in r["timeline"]))
    longest = max((r["window_s"] for r in rows), default=1.0) or 1.0
    ticks = svg.nice_ticks(longest)
    scale = PLOT_PX / ticks[-1]
    height = 30 + ROW_PX * len(rows) + 30
    width = LABEL_PX + PLOT_PX + LEGEND_PX
    out = svg._open(width, max(height, 40 + 16 * len(causes)), "activity the monitor counts, per design")
    axis_y = 30 + ROW_PX * len(rows) - 8
    out += svg._x_grid(ticks, scale, 16, axis_y, left=LABEL_PX)
    for i, r in enumerate(rows):
        y = 30 + i * ROW_PX
        out.append(svg._row_label(LABEL_PX - 6, y + 4, r["design"], False)
                   + f'<line x1="{LABEL_PX}" x2="{LABEL_PX + r["window_s"] * scale:.1f}" y1="{y}" y2="{y}" '
                   f'stroke="#ccc"/>')
        for e in r["timeline"]:
            if 0 <= e["t_s"] <= r["window_s"]:
                out.append(f'<rect x="{LABEL_PX + e["t_s"] * scale - 1.5:.1f}" y="{y - 8}" width="3" height="16" '
                           f'fill="{svg.color(causes.index(e["cause"]))}"><title>{escape(e["cause"])} at '
                           f'{e["t_s"]:.2f}s: {escape(e["query"][:80])}</title></rect>')
    out.append(f'<text x="{LABEL_PX + PLOT_PX / 2}" y="{axis_y + 28}" text-anchor="middle">seconds into the '
               f'window</text>')
    out += svg._legend(causes, LABEL_PX + PLOT_PX + 12, 30)
    out.append("</svg>")
    return "".join(out)


def _wakes(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _table(rows: list[dict]) -> str:
    limits = [v["suspend_after_s"] for v in rows[0]["verdicts"]] if rows else []
    head = "".join(f"<th>suspends @{t:g}s</th><th>wakes/hour</th>" for t in limits)
    body = []
    for r in rows:
        cells = "".join(
            f'<td class="{"ok" if v["would_suspend"] else "bad"}">'
            f'{"?" if v["would_suspend"] is None else "yes" if v["would_suspend"] else "never"}</td>'
            f'<td>{_wakes(v["wakes_per_hour"])}</td>'
            for v in r["verdicts"])
        causes = ", ".join(f"{escape(c)} {n}" for c, n in r["causes"].items()) or "none seen"
        reasons = "<br>".join(escape(f"@{v['suspend_after_s']:g}s: {v['reason']}") for v in r["verdicts"])
        body.append(f'<tr><td class="l">{escape(r["design"])}</td><td>{r["longest_quiet_s"]:.1f}</td>{cells}'
                    f'<td class="l">{causes}</td><td class="l">{reasons}</td></tr>')
    return (f'<table><tr><th class="l">design</th><th>longest quiet s</th>{head}<th class="l">activity</th>'
            f'<th class="l">how the answer was reached</th></tr>{"".join(body)}</table>')


def render(doc: dict) -> str:
    rows = doc.get("idle", [])
    pg, tool = doc.get("postgres", {}), doc.get("tool", {})
    body = (f"<h1>claimcheck idle footprint</h1><p class=meta>PostgreSQL {escape(str(pg.get('version', '?')))} "
            f"({escape(str(pg.get('source', '?')))}) · {escape(str(doc.get('created_at', '')))} · "
            f"<code>{escape(str(tool.get('command', '')))}</code></p>"
            f"<p class=meta>The probe {escape(str(doc.get('scope', '')))}.</p>"
            f"<h2>Would the compute suspend?</h2>{_table(rows)}"
            f"<h2>Activity as the monitor counts it</h2><figure>{timeline_svg(rows)}<figcaption>A session not idle "
            "at a half-second sample counts then; an idle one counts as of its last state change (when its last "
            "query ended). Hover a mark for its query.</figcaption></figure>")
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>claimcheck idle</title>'
            f"<style>{_CSS}</style></head><body>{body}</body></html>\n")


def write_idle_html(doc: dict, json_path: Path) -> Path:
    """Next to the JSON file, same name, `.html`, all of it or nothing (like the run report's)."""
    path = json_path.with_suffix(".html")
    write_whole(path, render(scrub_all(doc)))
    return path
