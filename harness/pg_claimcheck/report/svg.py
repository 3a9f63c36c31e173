"""Small SVG charts for the HTML report: lines, series over time, horizontal (stacked) bars, a heatmap.

Why hand-written SVG and not a plotting library: the report must open offline as one file.
plotly's inlined JS bundle is ~3.5 MB per report and matplotlib is a ~40 MB dependency with a
native toolchain; the four charts the report needs are a few hundred lines of SVG text, render
in any browser without script, stay a few tens of kB, and are easy to check in tests (they are
markup). Every function here is a pure function of plain numbers returning an `<svg>` string.
"""
from __future__ import annotations

import math
from html import escape
from typing import Sequence

from pg_claimcheck.verdict.stats import percentile

WIDTH_PX = 660
HEIGHT_PX = 300
LINE_WIDTH_PX = 900
MARGIN_PX = {"left": 64, "right": 150, "top": 16, "bottom": 44}
"""Room for the y tick labels (left), the legend (right) and the x axis title (bottom)."""
LINE_LEGEND_PX = 300
"""The line chart's legend names strategy · mode · batch: wider than the bar charts' event names."""
BAR_ROW_PX = 22
LABEL_COLUMN_PX = 230
HEAT_ROW_PX = 16
TOTAL_LABEL_PX = 48
"""Room after the longest bar for its total."""
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf")
"""Tableau 10: distinguishable, and the usual reading of red as 'bad' is kept for series 2."""
FONT = 'font-family="system-ui, sans-serif" font-size="11"'
BAD = "#c62828"
"""Violated runs: their labels, markers and outlines, in every chart."""
MAX_TIME_POINTS = 300
"""Points drawn per series over time: a longer series is cut into this many runs of samples, each drawn as its
largest value (a peak of depth or latency is never smoothed away)."""
FLAG = "\u2717 "
"""Prefix of a violated run's label (✗), so the mark survives printing in black and white."""


def color(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def nice_ticks(high: float, count: int = 5) -> list[float]:
    """Round tick values from 0 to at least `high` (1, 2, 2.5 or 5 times a power of ten apart)."""
    if high <= 0:
        return [0.0, 1.0]
    raw = high / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    return [i * step for i in range(int(math.ceil(high / step - 1e-9)) + 1)]


def _fmt(value: float) -> str:
    if value >= 10_000:
        return f"{value / 1000:,.0f}k"
    return f"{value:,.0f}" if value >= 10 or value == int(value) else f"{value:.2g}"


def _open(width: int, height: int, title: str) -> list[str]:
    # Scales with the window (width 100 %, never wider than drawn): at 800 px nothing is cut off.
    return [f'<svg xmlns="http://www.w3.org/2000/svg" width="100%" style="max-width:{width}px;height:auto" '
            f'viewBox="0 0 {width} {height}" role="img" {FONT}><title>{escape(title)}</title>']


CHAR_PX = 6.6
"""A generous average width of one character at the charts' 11 px font (bold included), for clipping."""


def _clipped(text: str, room_px: float) -> str:
    """The text, shortened with … to fit `room_px`, escaped; the full text goes in a <title> so hovering
    shows it. A run's label (`name · 4w · stale-stats`) keeps its parts after the name whole, which tell
    runs of one name apart, and shortens the name's end; anything else loses its middle (both ends of
    a name tell runs apart)."""
    most = max(int(room_px / CHAR_PX), 8)
    if len(text) <= most:
        return escape(text)
    head, sep, rest = text.partition(" · ")
    if sep and most - len(sep + rest) - 1 >= 8:
        return f"<title>{escape(text)}</title>{escape(head[:most - len(sep + rest) - 1] + '…' + sep + rest)}"
    keep = most - 1
    return f"<title>{escape(text)}</title>{escape(text[:(keep + 1) // 2] + '…' + text[len(text) - keep // 2:])}"


def _row_label(x: float, y: float, label: str, flagged: bool) -> str:
    if flagged:
        return (f'<text class="flagged" x="{x:.0f}" y="{y:.0f}" text-anchor="end" fill="{BAD}" font-weight="600">'
                f'{_clipped(FLAG + label, x - 2)}</text>')
    return f'<text x="{x:.0f}" y="{y:.0f}" text-anchor="end">{_clipped(label, x - 2)}</text>'


def _legend(names: Sequence[str], x: float, y: float, flagged: Sequence[bool] = (), room_px: float = 120,
            colors: Sequence[str] = PALETTE) -> list[str]:
    out = []
    for i, name in enumerate(names):
        yy = y + i * 16
        bad = i < len(flagged) and flagged[i]
        out.append(f'<rect x="{x:.0f}" y="{yy - 9:.0f}" width="10" height="10" fill="{colors[i % len(colors)]}"/>'
                   f'<text x="{x + 14:.0f}" y="{yy:.0f}"{f" fill={chr(34)}{BAD}{chr(34)}" if bad else ""}>'
                   f'{_clipped(name, room_px)}</text>')
    return out


def line_chart(series: dict[str, list[tuple[float, float]]], title: str, x_label: str, y_label: str,
               flagged: frozenset[tuple[str, float]] = frozenset(), reference: tuple[str, float] | None = None) -> str:
    """One line per series over numeric x values (markers too, so a single point shows). A `(series, x)`
    in `flagged` is a violated run: drawn as a red ✗ instead of a dot; the legend names the series in red with
    `✗ at` the x values where it violated. `reference`: a named horizontal line (an SLO), dashed."""
    m = {**MARGIN_PX, "right": LINE_LEGEND_PX}
    plot_w, plot_h = LINE_WIDTH_PX - m["left"] - m["right"], HEIGHT_PX - m["top"] - m["bottom"]
    xs = sorted({x for points in series.values() for x, _ in points}) or [0.0]
    y_ticks = nice_ticks(max([y for points in series.values() for _, y in points] + [reference[1] if reference else 0.0]))
    y_top = y_ticks[-1]
    # Worker counts are usually powers of two: a log scale spaces 1,2,4,8,16 evenly.
    log_x = len(xs) > 2 and xs[0] > 0 and xs[-1] / xs[0] >= 8
    lo, hi = (math.log2(xs[0]), math.log2(xs[-1])) if log_x else (xs[0], xs[-1])

    def px(x: float) -> float:
        v = math.log2(x) if log_x else x
        return m["left"] + (plot_w / 2 if hi == lo else (v - lo) / (hi - lo) * plot_w)

    def py(y: float) -> float:
        return m["top"] + plot_h - y / y_top * plot_h

    out = _axes(title, m, plot_w, plot_h, px, py, xs, y_ticks, x_label, y_label, reference)
    for i, (name, points) in enumerate(series.items()):
        pts = sorted(points)
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        # Past ten series the colours repeat: the second round is dashed (and said so in the legend).
        dash = ' stroke-dasharray="6 3"' if i >= len(PALETTE) else ""
        out.append(f'<polyline class="series" data-series="{escape(name)}" points="{path}" fill="none" '
                   f'stroke="{color(i)}" stroke-width="2"{dash}/>')
        for x, y in pts:
            tip = f'<title>{escape(name)}: {_fmt(x)} → {y:,.0f}{" (VIOLATED exactly-once)" if (name, x) in flagged else ""}</title>'
            if (name, x) in flagged:
                cx, cy = px(x), py(y)
                out.append(f'<path class="flagged" d="M{cx - 6:.1f},{cy - 6:.1f}L{cx + 6:.1f},{cy + 6:.1f}'
                           f'M{cx - 6:.1f},{cy + 6:.1f}L{cx + 6:.1f},{cy - 6:.1f}" stroke="{BAD}" stroke-width="3">'
                           f'{tip}</path>')
            else:
                out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3.5" fill="{color(i)}">{tip}</circle>')
    names = []
    for i, name in enumerate(series):
        bad = sorted(x for n, x in flagged if n == name)
        names.append(name + (" (dashed)" if i >= len(PALETTE) else "")
                     + (f" {FLAG.strip()} at {','.join(_fmt(x) for x in bad)}" if bad else ""))
    out += _legend(names, LINE_WIDTH_PX - m["right"] + 12, m["top"] + 10, flagged=[
        any(n == name for n, _ in flagged) for name in series], room_px=m["right"] - 30)
    out.append("</svg>")
    return "".join(out)


def _axes(title: str, m: dict, plot_w: float, plot_h: float, px, py, x_ticks: Sequence[float],
          y_ticks: Sequence[float], x_label: str, y_label: str, reference: tuple[str, float] | None) -> list[str]:
    """A line or time chart's frame: the opened SVG, its horizontal grid with the y ticks, the x ticks,
    both axis labels and the dashed reference line (an SLO), in plot coordinates `px`, `py`."""
    out = _open(LINE_WIDTH_PX, HEIGHT_PX, title)
    for t in y_ticks:
        out.append(f'<line x1="{m["left"]}" x2="{m["left"] + plot_w}" y1="{py(t):.1f}" y2="{py(t):.1f}" '
                   f'stroke="#e5e5e5"/><text x="{m["left"] - 6}" y="{py(t) + 4:.1f}" text-anchor="end">{_fmt(t)}</text>')
    for t in x_ticks:
        out.append(f'<text x="{px(t):.1f}" y="{m["top"] + plot_h + 16}" text-anchor="middle">{_fmt(t)}</text>')
    out.append(f'<text x="{m["left"] + plot_w / 2:.0f}" y="{HEIGHT_PX - 6}" text-anchor="middle">{escape(x_label)}</text>'
               f'<text transform="translate(14 {m["top"] + plot_h / 2:.0f}) rotate(-90)" text-anchor="middle">'
               f'{escape(y_label)}</text>')
    if reference is not None:
        out.append(_reference(reference, m["left"], m["left"] + plot_w, py(reference[1])))
    return out


def _reference(reference: tuple[str, float], x0: float, x1: float, y: float) -> str:
    name, value = reference
    return (f'<line class="reference" x1="{x0}" x2="{x1}" y1="{y:.1f}" y2="{y:.1f}" stroke="{BAD}" stroke-width="1.5" '
            f'stroke-dasharray="5 4"><title>{escape(name)}: {value:g}</title></line>'
            f'<text x="{x1 - 4}" y="{y - 4:.1f}" text-anchor="end" fill="{BAD}">{escape(name)} {_fmt(value)}</text>')


def peaks(points: Sequence[tuple[float, float | None]], most: int = MAX_TIME_POINTS) -> list[tuple[float, float | None]]:
    """At most `most` points: runs of consecutive points, each as its first time and its largest value (None
    where the whole run is None)."""
    if len(points) <= most:
        return list(points)
    size = math.ceil(len(points) / most)
    out = []
    for i in range(0, len(points), size):
        run = points[i:i + size]
        values = [y for _, y in run if y is not None]
        out.append((run[0][0], max(values) if values else None))
    return out


def time_chart(series: dict[str, Sequence[tuple[float, float | None]]], title: str, y_label: str,
               x_label: str = "seconds from the start of the run", reference: tuple[str, float] | None = None,
               until_s: float = 0.0) -> str:
    """Series over time (seconds): one line each, broken where a value is None (no sample, no claim), the
    x axis in round seconds (to `until_s` at least: charts of one run share it); a series longer than
    MAX_TIME_POINTS is drawn by its peaks (:func:`peaks`). `reference`: a named horizontal line (an SLO), dashed."""
    m = MARGIN_PX
    plot_w, plot_h = LINE_WIDTH_PX - m["left"] - m["right"], HEIGHT_PX - m["top"] - m["bottom"]
    drawn = {name: peaks(sorted(points, key=lambda p: p[0])) for name, points in series.items()}
    times = [t for points in drawn.values() for t, _ in points]
    t0, t1 = min(times, default=0.0), max(times + [until_s], default=1.0)
    t0 = min(t0, 0.0)
    x_ticks = nice_ticks(t1 if t1 > 0 else 1.0, 8)
    x_hi = max(x_ticks[-1], t1)
    values = [y for points in drawn.values() for _, y in points if y is not None]
    y_ticks = nice_ticks(max(values + [reference[1] if reference else 0.0], default=0.0))
    y_top = y_ticks[-1]

    def px(t: float) -> float:
        return m["left"] + (t - t0) / ((x_hi - t0) or 1.0) * plot_w

    def py(y: float) -> float:
        return m["top"] + plot_h - y / y_top * plot_h

    out = _axes(title, m, plot_w, plot_h, px, py, x_ticks, y_ticks, x_label, y_label, reference)
    for i, (name, points) in enumerate(drawn.items()):
        segment: list[str] = []
        for t, y in points + [(math.inf, None)]:  # a None (and the end) closes the segment drawn so far
            if y is not None:
                segment.append(f"{px(t):.1f},{py(y):.1f}")
                continue
            if len(segment) == 1:  # a lone point still shows
                cx, cy = segment[0].split(",")
                out.append(f'<circle cx="{cx}" cy="{cy}" r="2.5" fill="{color(i)}"/>')
            elif segment:
                out.append(f'<polyline class="series" data-series="{escape(name)}" points="{" ".join(segment)}" '
                           f'fill="none" stroke="{color(i)}" stroke-width="1.5"/>')
            segment = []
    out += _legend(list(drawn), LINE_WIDTH_PX - m["right"] + 12, m["top"] + 10, room_px=m["right"] - 30)
    out.append("</svg>")
    return "".join(out)


def bar_chart(labels: Sequence[str], stacks: dict[str, Sequence[float]], title: str, x_label: str,
              legend: bool | None = None, flagged: Sequence[bool] = (), total_format: str = ",.0f",
              hollow_flagged: bool = False) -> str:
    """Horizontal bars, one row per label, each split into the `stacks` (legend names) in order.
    The legend shows when asked, or by default when there is more than one stack. A row whose
    `flagged` is true is a violated run: its label is red and marked ✗; with `hollow_flagged` (a
    figure a violated run earns no credit for, its throughput) its bar is only a dashed red outline
    and its total says it does not count, so it never reads like a correct run's full bar."""
    m = MARGIN_PX
    legend = len(stacks) > 1 if legend is None else legend
    width = WIDTH_PX + LABEL_COLUMN_PX - m["left"]
    plot_w = width - LABEL_COLUMN_PX - (m["right"] if legend else 24) - TOTAL_LABEL_PX
    height = m["top"] + max(len(labels), 1) * BAR_ROW_PX + m["bottom"]
    totals = [sum(values[i] for values in stacks.values()) for i in range(len(labels))]
    ticks = nice_ticks(max(totals, default=0.0))
    scale = plot_w / ticks[-1]
    out = _open(width, height, title)
    bottom = m["top"] + len(labels) * BAR_ROW_PX
    out += _x_grid(ticks, scale, m["top"], bottom)
    for row, label in enumerate(labels):
        y = m["top"] + row * BAR_ROW_PX
        bad = row < len(flagged) and flagged[row]
        hollow = bad and hollow_flagged
        out.append(_row_label(LABEL_COLUMN_PX - 6, y + 15, label, bad))
        x = float(LABEL_COLUMN_PX)
        for i, (name, values) in enumerate(stacks.items()):
            w = values[row] * scale
            if w > 0:
                paint = (f'fill="none" stroke="{BAD}" stroke-dasharray="4 3"' if hollow else f'fill="{color(i)}"')
                out.append(f'<rect class="{"bar violated" if hollow else "bar"}" x="{x:.1f}" y="{y + 3}" width="{w:.1f}" '
                           f'height="{BAR_ROW_PX - 6}" {paint}><title>{escape(label)} · {escape(name)}: '
                           f'{values[row]:{total_format}}{" (VIOLATED exactly-once: does not count)" if bad else ""}'
                           f'</title></rect>')
                x += w
        total = f"{totals[row]:{total_format}}"
        out.append(f'<text x="{x + 4:.1f}" y="{y + 15}"{f" fill={chr(34)}{BAD}{chr(34)}" if hollow else ""}>'
                   f'{f"{FLAG}{total}" if hollow else total}</text>')
    out.append(f'<text x="{LABEL_COLUMN_PX + plot_w / 2:.0f}" y="{height - 6}" text-anchor="middle">'
               f'{escape(x_label)}</text>')
    if legend:
        out += _legend(list(stacks), width - m["right"] + 12, m["top"] + 10)
    out.append("</svg>")
    return "".join(out)


def _x_grid(ticks: Sequence[float], scale: float, top: float, bottom: float,
            left: float = LABEL_COLUMN_PX) -> list[str]:
    """Vertical grid lines and their value labels, for charts whose bars, ranges or timelines run left to
    right from `left` (the end of their label column)."""
    out = []
    for t in ticks:
        x = left + t * scale
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{bottom}" stroke="#e5e5e5"/>'
                   f'<text x="{x:.1f}" y="{bottom + 14}" text-anchor="middle">{_fmt(t)}</text>')
    return out


MARK_COLORS = ("#9ecae1", "#3182bd", "#08306b")
"""A range chart's marks (p50, p95, p99): one hue, darker for the higher percentile; never BAD's red,
which means a violated run."""
AXIS_PERCENTILE = 75
OUTLIER_FACTOR = 4.0
"""The range chart's axis ends at its largest value within four times the upper quartile of its values; a
value past that is drawn at the edge, marked clipped, with its figure, so a few slow runs (a 700 ms outlier)
do not squash every other run to 0. A quarter of the values or more far out is no outlier: it sets the axis."""


def axis_end(values: Sequence[float]) -> float:
    """Where a range chart's axis ends: the largest value, unless it is an outlier (above OUTLIER_FACTOR
    times the AXIS_PERCENTILE-th percentile, nearest-rank), then the largest value that is not."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    typical = percentile(ordered, AXIS_PERCENTILE)
    kept = [v for v in ordered if v <= OUTLIER_FACTOR * typical] if typical > 0 else ordered
    return kept[-1] if kept else ordered[-1]


def range_chart(labels: Sequence[str], marks: dict[str, Sequence[float | None]], title: str, x_label: str,
                flagged: Sequence[bool] = ()) -> str:
    """One row per label: a line from its smallest to its largest mark, and a tick per mark (e.g. the
    p50, p95 and p99 of claim latency), labelled in the legend. A row without marks stays empty; a
    mark past the axis's end (:func:`axis_end`) sits at the edge as a ▸ with its value, class `clipped`."""
    m = MARGIN_PX
    width = WIDTH_PX + LABEL_COLUMN_PX - m["left"]
    plot_w = width - LABEL_COLUMN_PX - m["right"] - 12
    height = m["top"] + max(len(labels), 1) * BAR_ROW_PX + m["bottom"]
    ticks = nice_ticks(axis_end([v for vs in marks.values() for v in vs if v is not None]))
    scale = plot_w / ticks[-1]
    edge = ticks[-1]
    out = _open(width, height, title)
    bottom = m["top"] + len(labels) * BAR_ROW_PX
    out += _x_grid(ticks, scale, m["top"], bottom)
    for row, label in enumerate(labels):
        y = m["top"] + row * BAR_ROW_PX + BAR_ROW_PX / 2
        out.append(_row_label(LABEL_COLUMN_PX - 6, y + 4, label, row < len(flagged) and flagged[row]))
        values: list[tuple[str, float]] = [(name, v) for name, vs in marks.items() if (v := vs[row]) is not None]
        if not values:
            continue
        xs = [LABEL_COLUMN_PX + min(v, edge) * scale for _, v in values]
        out.append(f'<line x1="{min(xs):.1f}" x2="{max(xs):.1f}" y1="{y:.1f}" y2="{y:.1f}" stroke="#999" '
                   f'stroke-width="2"/>')
        past = [(name, v) for name, v in values if v > edge]
        for i, (name, value) in enumerate(marks.items()):
            v = value[row]
            if v is not None and v <= edge:
                out.append(f'<circle class="mark" cx="{LABEL_COLUMN_PX + v * scale:.1f}" cy="{y:.1f}" r="4.5" '
                           f'fill="{MARK_COLORS[i % len(MARK_COLORS)]}"><title>{escape(label)} · {escape(name)}: '
                           f'{v:.2f}</title></circle>')
        if past:  # one ▸ at the edge for the row's marks past it, their values written before it
            x = LABEL_COLUMN_PX + edge * scale
            words = " · ".join(f"{name} {_fmt(v)}" for name, v in past)
            out.append(f'<path class="clipped" d="M{x - 2:.1f},{y - 6:.1f}L{x + 6:.1f},{y:.1f}L{x - 2:.1f},{y + 6:.1f}Z" '
                       f'fill="{MARK_COLORS[-1]}"><title>{escape(label)}: {escape(words)} (past the axis)</title></path>'
                       f'<text x="{x - 5:.1f}" y="{y + 4:.1f}" text-anchor="end" fill="#333" paint-order="stroke" '
                       f'stroke="#fff" stroke-width="3">{escape(words)}</text>')
    out.append(f'<text x="{LABEL_COLUMN_PX + plot_w / 2:.0f}" y="{height - 6}" text-anchor="middle">'
               f'{escape(x_label)}</text>')
    out += _legend(list(marks), width - m["right"] + 12, m["top"] + 10, colors=MARK_COLORS)
    out.append("</svg>")
    return "".join(out)


def heatmap(rows: dict[str, Sequence[int]], bucket_s: float, title: str) -> str:
    """One row per worker, one cell per time bucket, darker = more claims in that bucket."""
    m = MARGIN_PX
    buckets = max((len(v) for v in rows.values()), default=1)
    plot_w = WIDTH_PX - m["left"] - 24
    cell_w = plot_w / buckets
    height = m["top"] + len(rows) * HEAT_ROW_PX + m["bottom"]
    peak = max((c for v in rows.values() for c in v), default=0) or 1
    out = _open(WIDTH_PX, height, title)
    for r, (name, counts) in enumerate(rows.items()):
        y = m["top"] + r * HEAT_ROW_PX
        out.append(f'<text x="{m["left"] - 6}" y="{y + 12}" text-anchor="end">{escape(name)}</text>'
                   f'<rect x="{m["left"]}" y="{y}" width="{plot_w:.1f}" height="{HEAT_ROW_PX - 2}" fill="#f4f4f4"/>'
                   f'<g fill="{PALETTE[0]}" data-worker="{escape(name)}">')
        for b, count in enumerate(counts):
            if count:  # empty buckets stay background: smaller file, and idle time shows as gaps
                # Position, size and colour shared per row (the <g>); a cell carries only what varies.
                out.append(f'<rect class="cell" x="{m["left"] + b * cell_w:.0f}" y="{y}" width="{cell_w + 1:.0f}" '
                           f'height="{HEAT_ROW_PX - 2}" fill-opacity="{0.15 + 0.85 * count / peak:.2f}">'
                           f'<title>{b * bucket_s:.3f}s: {count:,}</title></rect>')
        out.append("</g>")
    bottom = m["top"] + len(rows) * HEAT_ROW_PX
    for t in nice_ticks(buckets * bucket_s, 6):
        if t <= buckets * bucket_s + 1e-9:
            x = m["left"] + t / bucket_s * cell_w
            out.append(f'<text x="{x:.1f}" y="{bottom + 14}" text-anchor="middle">{t:g}</text>')
    out.append(f'<text x="{m["left"] + plot_w / 2:.0f}" y="{height - 6}" text-anchor="middle">seconds from the '
               f'start of the run (bucket {bucket_s * 1000:.1f} ms; darkest = {peak:,} claims)</text></svg>')
    return "".join(out)
