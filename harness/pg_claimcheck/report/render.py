"""Rendering results: the rich table people read, and the JSON document scripts read.

Both are functions of plain result objects; nothing here runs a query.
"""
from __future__ import annotations

import contextlib
import json
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Iterable

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from pg_claimcheck import __version__
from pg_claimcheck.errors import ClaimcheckError
from pg_claimcheck.report.validation import SCHEMA_VERSION
from pg_claimcheck.server.pooling import pooler_words
from pg_claimcheck.server.provision import Server
from pg_claimcheck.server.redaction import scrub_all
from pg_claimcheck.server.schema import job_words, numbering_note
from pg_claimcheck.verdict import power
from pg_claimcheck.verdict.ledger import Violation
from pg_claimcheck.verdict.liveness import HELD, NO_PROGRESS, VIOLATED, WORDS
from pg_claimcheck.verdict.result import RunResult

REPORTS_DIR = Path("reports")
EVIDENCE_SHOWN = 5
FATES_SHOWN = 3


def document(server: Server, runs: Iterable[RunResult], command: str, settings: dict, plans=None,
             knees=None, looked: Iterable[power.Power] = ()) -> dict:
    """The JSON contract (docs/contracts.md section 3, `report.schema.json`): `postgres`, `settings`,
    `runs` (one object per strategy x setting, and per planner condition run), with `plans`
    (pg_claimcheck.plans.explore.ConditionOutcome) `conditions`: every condition tried, with `knees` (pg_claimcheck.
    verdict.knee.Knee, `bench --rate`) each setting's knee; `looked`: runs' power not in `runs` (sizing runs)."""
    runs = list(runs)
    doc = {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "claimcheck", "version": __version__, "command": command},
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count(),
                    # at the end of the runs: compare warns when two reports were made under different load
                    "load_average_1m": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None},
        "postgres": {"version": server.version, "version_num": server.version_num, "source": server.source,
                     "pooler": server.pooler.as_dict() if server.pooler else None},
        "settings": settings,
        "runs": [run.as_dict() for run in runs],
    }
    if plans is not None:
        doc["conditions"] = [outcome.as_dict() for outcome in plans]
    if (total := power.combined([*(run.power for run in runs), *looked])) is not None:
        doc["power"] = total.as_dict()
    if knees is not None:
        doc["knees"] = [knee.as_dict() for knee in knees]
    return doc


def write_whole(path: Path, text: str) -> None:
    """`text` at `path`, all of it or nothing: written to a temporary file beside it, then renamed over
    it. A disk that fills up mid-write leaves no empty or cut file at `path` (and an older one whole)."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".partial")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, 0o644)  # mkstemp's 0600: a report is read by others, as write_text made it
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def write_json(doc: dict, path: Path | None, verb: str) -> Path:
    if path is None:
        path = REPORTS_DIR / f"{verb}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    text = json.dumps(scrub_all(doc), indent=2) + "\n"  # every file sink scrubs, once
    try:
        if path.parent == REPORTS_DIR:
            REPORTS_DIR.mkdir(exist_ok=True)
        write_whole(path, text)
    except OSError as exc:
        # The run is over and its verdict is in `doc`: never lost to a destination that failed late
        # (commands/_options.check_writable tries it before the run; a disk can still fill up).
        kept = Path(tempfile.gettempdir()) / f"claimcheck-{verb}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.json"
        kept.write_text(text)
        raise ClaimcheckError(f"could not write the JSON report to {path} ({exc.strerror or exc}); the report is "
                              f"kept at {kept}") from None
    return path


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def _percentiles(lat: dict) -> str:
    """A latency summary as p50/p95/p99/max, in ms."""
    return "/".join(_ms(lat[k]) for k in ("p50", "p95", "p99", "max"))


def _top_wait(run: RunResult) -> str:
    events = run.waits.events
    lock_events = [(k, n) for k, n in events.most_common() if k.startswith("Lock/")]
    if not lock_events:
        return "none"
    key, samples = lock_events[0]
    return f"{key} {samples:,}"


_NOTES = {  # key: (mark in a compact table, its caption, words in a wide table, their style)
    "uncaught": ("*", "unsafe by its header, but no violation was caught in this run",
                 " (unsafe, not caught this run)", "yellow"),
    "surprise": ("!", "expected safe, yet violated", " (expected safe!)", "bold red"),
    "stalled": ("s", "stalled: no claim for a while", " stalled", "red"),
    "no-progress": ("p", "no progress: claims went on but no job was finished", " no progress", "red"),
    "violation": ("e", "stopped early at a proven violation; `check --drain` runs to the end", " stopped early",
                  "yellow"),
}


def _notes(run: RunResult) -> list[str]:
    """What the verdict column must also say about a run, as keys of _NOTES."""
    notes = []
    if run.strategy.expected == "unsafe" and not run.violated:
        notes.append("uncaught")
    elif run.strategy.expected == "safe" and run.violated:
        notes.append("surprise")
    if run.stopped_by == "violation" or (run.stopped_by in ("stalled", "no-progress") and run.violated):
        notes.append(run.stopped_by)
    return notes


def verdict_text(run: RunResult, compact: bool = False) -> Text:
    """`exactly-once`, `VIOLATED` or `NO PROGRESS` (RunResult.outcome: safety, then liveness), and its notes: in
    words, or as the marks a compact table explains in its caption."""
    outcome = run.outcome
    text = Text(WORDS[outcome], style={HELD: "bold green", VIOLATED: "bold red", NO_PROGRESS: "bold yellow"}[outcome])
    notes = _notes(run)
    if compact:
        if notes:
            text.append(" (" + "".join(_NOTES[n][0] for n in notes) + ")", style="yellow")
        return text
    for note in notes:
        text.append(_NOTES[note][2], style=_NOTES[note][3])
    return text


def results_table(runs: list[RunResult], title: str, wide: bool = True) -> Table:
    """The results: every column with `wide`, else the columns a person reads first, in 80 columns."""
    if not wide:
        return _compact_table(runs, title)
    table = Table(title=title, header_style="bold", title_justify="left")
    for name, justify in (("strategy", "left"), ("mode", "left"), ("work-\ners", "right"), ("batch", "right"),
                          ("claims", "right"), ("unique", "right"),
                          ("double\nclaimed", "right"), ("extra\nclaims", "right"), ("un-\nclaimed", "right"),
                          ("done", "right"), ("ser.\nfail", "right"), ("jobs/s", "right"),
                          ("claim ms\np50/p95/p99", "right"), ("top lock wait\n(samples)", "left"),
                          ("peak\nwaiting", "right"), ("verdict", "left")):
        if name == "verdict" and any(run.pgbench for run in runs):
            table.add_column("pgbench\njobs/s", justify="right", no_wrap=True)
            table.add_column("ratio", justify="right", no_wrap=True)
        if name == "verdict" and any(run.plan for run in runs):
            table.add_column("plan", justify="left", no_wrap=True)
        if name == "verdict" and any(run.producer for run in runs):
            table.add_column("rate/s\noffered/\nachieved", justify="right", no_wrap=True)
            table.add_column("end-to-end ms\np50/p95/p99/max", justify="right", no_wrap=True)
            for heading in ("pickup\np99 ms", "max\ndepth", "dead tuples\nfinal/max", "max\ntable"):
                table.add_column(heading, justify="right", no_wrap=True)
        table.add_column(name, justify=justify, no_wrap=name not in ("verdict", "strategy"))
    for run in runs:
        v, lat = run.verdict, run.claim_latency_ms
        table.add_row(
            run_label(run), run.settings.mode, str(run.settings.workers), str(run.settings.batch),
            f"{v.claims:,}", f"{v.unique_jobs_claimed:,}",
            Text(f"{v.double_claimed_jobs:,}", style="red" if v.double_claimed_jobs else ""),
            f"{v.extra_claims:,}", Text(f"{v.unclaimed_jobs:,}", style="red" if v.unclaimed_jobs and v.drained else ""),
            f"{run.jobs_done:,}", f"{run.serialization_failures:,}", f"{run.throughput_jobs_per_s:,.0f}",
            f"{_ms(lat['p50'])}/{_ms(lat['p95'])}/{_ms(lat['p99'])}", _top_wait(run),
            str(run.waits.max_waiting_workers),
            *_parity_cells(run, any(r.pgbench for r in runs)),
            *_plan_cells(run, any(r.plan for r in runs)),
            *_rate_cells(run, any(r.producer for r in runs)),
            verdict_text(run),
        )
    return table


def print_producer(console: Console, run: RunResult) -> None:
    """A rate run's producer (`check --rate`): offered and achieved rate, pickup and end-to-end latency
    from the scheduled enqueue time, and, in red, a producer that did not keep up."""
    p = run.producer
    if p is None:
        return

    who = "producer" if len(p.producers) <= 1 else f"{len(p.producers)} producers"
    console.print(Text(f"{who}: offered {p.rate_per_s:g} jobs/s for {p.duration_s:g}s, achieved "
                       f"{p.achieved_rate_per_s:,.1f} jobs/s ({p.enqueued:,} of {p.scheduled:,} enqueued, max lag "
                       f"{p.max_lag_ms:,.1f} ms); latency ms from the scheduled enqueue, p50/p95/p99/max: pickup "
                       f"{_percentiles(p.pickup_latency_ms)}, end-to-end {_percentiles(p.end_to_end_latency_ms)}; on {p.clock}"))
    if p.wakeups is not None:
        console.print(Text(f"--wakeup notify: idle workers' waits ended by a notification {p.wakeups['notified']:,} "
                           f"times, by the fallback timeout {p.wakeups['fallback']:,}"))
    queue = queue_words(run)
    if queue:
        console.print(Text(queue))
    if p.behind:
        console.print(Text(p.behind, style="bold red"))


def run_label(run: RunResult) -> Text:
    """The strategy's name, and the planner condition the run was made under (Text: a name is never markup)."""
    return Text(run.strategy.name + (f" under {run.condition}" if run.condition else ""))


def _compact_table(runs: list[RunResult], title: str) -> Table:
    """strategy, mode, workers, double claimed, unclaimed, jobs/s, claim p95 and the verdict: the
    figures that decide, narrow enough for an 80-column terminal (`--wide` shows the rest)."""
    table = Table(title=title, header_style="bold", title_justify="left", box=box.SIMPLE_HEAD, padding=0, show_edge=False,
                  caption_justify="left")
    table.add_column("strategy", justify="left", overflow="fold", min_width=12)
    table.add_column("mode", justify="left", no_wrap=True)
    for name in ("work-\ners", "double\nclaimed", "un-\nclaimed", "jobs/s", "claim\np95 ms"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("verdict", justify="left", no_wrap=True, min_width=12)
    for run in runs:
        v = run.verdict
        table.add_row(
            run_label(run), run.settings.mode, str(run.settings.workers),
            Text(f"{v.double_claimed_jobs:,}", style="red" if v.double_claimed_jobs else ""),
            Text(f"{v.unclaimed_jobs:,}", style="red" if v.unclaimed_jobs and v.drained else ""),
            f"{run.throughput_jobs_per_s:,.0f}", _ms(run.claim_latency_ms["p95"]), verdict_text(run, compact=True))
    shown = sorted({n for run in runs for n in _notes(run)}, key=list(_NOTES).index)
    lines = [f"({_NOTES[n][0]}) {_NOTES[n][1]}" for n in shown]
    table.caption = "\n".join(lines + ["--wide: every column (claims, done, p50/p99, lock waits)"])
    return table


def _rate_cells(run: RunResult, shown: bool) -> list[Text]:
    """A rate run's offered and achieved rate (red when the producer fell behind) and end-to-end latency."""
    if not shown:
        return []
    p = run.producer
    if p is None:
        return [Text("-")] * 6
    q = run.over_time.summary if run.over_time is not None else {}
    return [Text(f"{p.rate_per_s:g}/{p.achieved_rate_per_s:,.0f}", style="" if p.kept_up else "red"),
            Text(_percentiles(p.end_to_end_latency_ms)), Text(_ms(p.pickup_latency_ms.get("p99"))),
            Text(_count_or_dash(q.get("max_depth"))),
            Text(f"{_count_or_dash(q.get('final_dead_tuples'))}/{_count_or_dash(q.get('max_dead_tuples'))}"),
            Text(size_words(q.get("max_table_bytes")))]


def _count_or_dash(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"


def size_words(n: int | None) -> str:
    """Bytes as the table and the producer's line show them: `392 kB`, `12.5 MB`."""
    if n is None:
        return "-"
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if n >= size:
            return f"{n / size:,.1f} {unit}" if n < 100 * size else f"{n / size:,.0f} {unit}"
    return f"{n} B"


def queue_words(run: RunResult) -> str | None:
    """A rate run's queue in words: the deepest it got, dead tuples at the end and at most, the largest table."""
    q = run.over_time.summary if run.over_time is not None else None
    if not q or not q["samples"]:
        return None
    return (f"queue: max depth {q['max_depth']:,} (final {q['final_depth']:,}), dead tuples {q['final_dead_tuples']:,} "
            f"at the end ({q['max_dead_tuples']:,} at most), table with indexes {size_words(q['max_table_bytes'])} "
            f"at most; {q['samples']:,} samples every {run.over_time.queue['interval_s']:g} s")


def knee_table(knees) -> Table:
    """Each setting's knee in a rate sweep (pg_claimcheck.verdict.knee): its pickup p99 at each rate, marked
    sustained (✓) or not (✗), and why the first rate it did not sustain fell over."""
    rates = sorted({p.rate_per_s for k in knees for p in k.points})
    slo = knees[0].slo_ms if knees else 0
    table = Table(title=f"knees: the highest offered rate sustained (pickup p99 ≤ {slo:g} ms, producer kept up, "
                        "≥ 95 % achieved, exactly-once; docs/producers.md)", title_justify="left", header_style="bold")
    for name in ("strategy", "mode", "work-\ners", "batch", "knee"):
        table.add_column(name, justify="right" if name in ("work-\ners", "batch") else "left",
                         no_wrap=name != "strategy")
    for rate in rates:
        table.add_column(f"{rate:,g}/s\np99 ms", justify="right", no_wrap=True)
    table.add_column("first rate not sustained: why", justify="left")
    for k in knees:
        by_rate = {p.rate_per_s: p for p in k.points}
        cells = [Text("-") if r not in by_rate else
                 Text(f"{_ms(by_rate[r].pickup_p99_ms)} {'✓' if by_rate[r].sustained else '✗'}",
                      style="green" if by_rate[r].sustained else "red") for r in rates]
        first = k.first_unsustained
        why = "-" if first is None else f"{first.rate_per_s:,g}/s: {'; '.join(first.shortfalls)}"
        table.add_row(Text(k.strategy), k.mode, str(k.workers), str(k.batch), Text(k.summary, style="bold"), *cells,
                      Text(why))
    return table


def _parity_cells(run: RunResult, shown: bool) -> list[str]:
    """pgbench's jobs/s for the same SQL and ours over it (`bench --pgbench`)."""
    if not shown:
        return []
    if run.pgbench is None or run.pgbench_ratio is None:
        return ["-", "-"]
    return [f"{run.pgbench.jobs_per_s:,.0f}", f"{run.pgbench_ratio:.2f}"]


def _plan_cells(run: RunResult, shown: bool) -> list[Text]:
    """The plan guard: `locks+index` when rows are locked as picked and reached through an index."""
    if not shown:
        return []
    if run.plan is None:
        return [Text("-")]
    if run.plan.shape_ok:
        return [Text("locks+index", style="green")]
    missing = [name for name, needle in (("no LockRows", "no LockRows"), ("seq scan", "Seq Scan"))
               if any(needle in reason for reason in run.plan.reasons)]
    return [Text(", ".join(missing) or "fails", style="yellow")]


def evidence_lines(violations: Iterable[Violation], limit: int = EVIDENCE_SHOWN, first_id: int = 0) -> list[str]:  # job_words
    lines: list[str] = []
    for violation in list(violations)[:limit]:
        times = max(violation.times_claimed, len(violation.claims))
        backends = {claim.backend_pid for claim in violation.claims}
        shared = (f", every claim shown on backend {next(iter(backends))}: one server session, handed to "
                  "several workers by the pooler" if len(backends) == 1 and None not in backends
                  and len({c.worker for c in violation.claims}) > 1 else "")
        lines.append(f"{job_words(violation.job, first_id)}: claimed {'once' if times == 1 else f'{times:,} times'} ({violation.kind})"
                     + (f", the first {len(violation.claims)} shown" if times > len(violation.claims) else "") + shared)
        for claim in violation.claims:
            ended = "never ended" if claim.ended_at_s is None else f"ended +{claim.ended_at_s:.4f}s"
            reaped = "" if claim.reaped_at_s is None else f"  reaped +{claim.reaped_at_s:.4f}s"
            backend = "" if claim.backend_pid is None else f"  backend {claim.backend_pid}"
            lines.append(f"    worker w{claim.worker:02d}  attempt {claim.attempt}  "
                         f"claimed +{claim.claimed_at_s:.4f}s  {ended}  ({claim.outcome}){reaped}{backend}")
    return lines


def print_stop(console: Console, run: RunResult) -> None:
    """Say that a run stopped before its drain, why, and how to run it to the end."""
    if run.stopped_early:  # of an over-claim, a run stopped at its proof records the rows it asked for (ClaimRows.cut)
        cut = " (of an over-claim, the rows it asked for: its count proves it)" if run.verdict.over_claims else ""
        console.print(f"[yellow]{escape(run_label(run).plain)} ({run.settings.mode}): stopped early[/]: {run.stop_reason}. "
                      f"The figures cover the {run.verdict.claims:,} claims recorded until the workers stopped"
                      f"{cut if run.stopped_by == 'violation' else ''}; add --drain to run it to the end.", highlight=False)


def print_power(console: Console, doc: dict) -> None:
    """The report's footer: the document's `power` (summed by :func:`document`), as the HTML shows it."""
    total = doc.get("power")
    if total is None:
        return
    waits = f"; lock waits sampled: {total['lock_waits']:,}" if total["lock_waits"] is not None else ""
    console.print(Text(f"power: {total['statement']}{waits}", style="dim"))
    for line in total["unseen"]:
        console.print(Text(f"not seen: {line}", style="yellow"))


def print_server(console: Console, server: Server) -> None:
    console.print(f"[bold]PostgreSQL {server.version}[/] ({server.source})"
                  + (f" through {server.pooler.label()}" if server.pooler else ""), highlight=False)


def server_title(server: Server) -> str:
    """The server in a table's title, e.g. "PostgreSQL 15.4 (dsn), workers through PgBouncer 1.18.0 in
    transaction mode, pool of 4"."""
    through = "" if server.pooler is None else f", workers through {pooler_words(server.pooler.as_dict(), detail=False)}"
    return f"PostgreSQL {server.version} ({server.source}){through}"


def limit_line(run: RunResult) -> str | None:
    """Say so when the claim's limit cannot be known: over-claims were then not judged."""
    if run.claim_limit.rows is not None:
        return None
    return (f"{run.strategy.name} ({run.settings.mode}): the claim's limit cannot be known from its text (no "
            "%(batch)s, no LIMIT written as a number), so no claim was judged an over-claim; write the limit as "
            "%(batch)s or as a number to have it judged")


def claim_errors_line(run: RunResult) -> str | None:
    """Server errors inside claims, by SQLSTATE, and reconnects: outcomes, shown under the table."""
    if not run.claim_errors and not run.reconnects:
        return None
    counts = ", ".join(f"{state} ×{n:,}" for state, n in run.claim_errors.items()) or "none"
    return (f"{run.strategy.name} ({run.settings.mode}): server errors in claims, each rolled back and retried "
            f"on the same connection: {counts}; reconnects after a lost connection: {run.reconnects:,}")


def shape_lines(evidence: Iterable[dict], limit: int = EVIDENCE_SHOWN) -> list[str]:
    lines = []
    for e in list(evidence)[:limit]:
        if e["kind"] == "over-claim":
            asked = f"asked for {e['limit']}" if e.get("limit") is not None else "asked for fewer"
            lines.append(f"over-claim: worker w{e['worker']:02d} got {e['rows']} rows from one claim that {asked} "
                         f"at +{e['claimed_at_s']:.4f}s: jobs {', '.join(map(str, e['jobs']))}")
        else:
            lines.append(f"over-attempt: job {e['job']} claimed by w{e['worker']:02d} as attempt {e['attempt']} "
                         f"with max_attempts {e['max_attempts']}")
    return lines


def violation_summary(run: RunResult) -> list[str]:
    """What made a run fail, one phrase per kind: the terminal, the pytest plugin and the API say
    the same."""
    v = run.verdict
    problems = [f"{v.double_claimed_jobs:,} job(s) handed to more than one worker"] if v.double_claimed_jobs else []
    if v.never_finished:
        problems.append(f"{v.never_finished:,} claimed job(s) never finished: their completion changed no row "
                        "although nothing had released the claim (does `complete` match the row the claim took?)")
    if v.stale_completion_violations:
        problems.append(f"{v.stale_completion_violations:,} stale completion(s) that changed a row "
                        "the worker no longer owned")
    if v.unclaimed_jobs and v.drained:
        problems.append(f"{v.unclaimed_jobs:,} unclaimed")
    if v.unexpected_jobs:
        problems.append(f"{v.unexpected_jobs:,} unexpected ids")
    if v.over_claims:
        problems.append(f"{v.over_claims:,} over-claim(s): more rows than the claim asked for "
                        f"(its limit: {run.claim_limit.describe()})")
    if v.over_attempts:
        problems.append(f"{v.over_attempts:,} claim(s) beyond max_attempts")
    if not run.lifecycle_ok:
        problems.append(f"{run.unfinished_jobs:,} job(s) neither done nor failed, "
                        f"{run.table.over_max_attempts:,} over max_attempts")
    if run.liveness is not None:  # after the safety violations: it is the outcome only without them
        problems.append(f"no progress ({run.liveness})")
    return problems


def print_evidence(console: Console, run: RunResult, limit: int = EVIDENCE_SHOWN) -> None:
    v = run.verdict
    for note in (limit_line(run), claim_errors_line(run)):
        if note:
            console.print(note, highlight=False, markup=False)
    if run.exactly_once:
        return
    problems = violation_summary(run)
    lines = evidence_lines(v.violations, limit, run.seeded.first_id) + shape_lines(v.shape_evidence, limit)
    # A run that failed without a violating claim (it stalled or made no progress) has no evidence
    # lines: no heading promises them.
    if not run.violated:  # a liveness failure: no double claim, no lost job, and it says so
        console.print(f"[bold yellow]{escape(run_label(run).plain)} ({run.settings.mode}): NO PROGRESS[/] (a liveness "
                      f"failure, not a double claim: no job was handed out twice or lost): {escape(run.liveness or '')}.",
                      highlight=False)
        return
    console.print(f"[bold red]{escape(run_label(run).plain)} ({run.settings.mode}): {'; '.join(problems) or 'violated'}[/]. "
                  f"{_count(v.extra_claims, 'extra claim')}, {_count(v.redeliveries, 'redelivery', 'redeliveries')}."
                  + (f" Evidence (times from the start of the run{numbering_note(run.seeded.first_id)}):" if lines else ""))
    for line in lines:
        console.print(line, highlight=False, markup=False)


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else many or one + 's'}"


def faults_table(run: RunResult) -> Table:
    """Each injected fault and what became of its jobs."""
    table = Table(title=f"faults injected into {run.strategy.name} ({run.settings.mode} mode)",
                  title_justify="left", header_style="bold")
    for name in ("at s", "fault", "worker", "what happened", "its jobs"):
        table.add_column(name, justify="right" if name == "at s" else "left", overflow="fold")
    for event in run.faults:
        table.add_row(f"{event.at_s:.2f}", event.kind, "-" if event.worker is None else f"w{event.worker:02d}",
                      event.detail, _fates(event.jobs))
    if run.faults_skipped:
        table.caption = (f"not injected: {', '.join(run.faults_skipped)} (a restart needs a server claimcheck "
                         "started; other faults need a live worker before the run ends)")
    return table


def _fates(jobs: list[dict]) -> str:
    if not jobs:
        return "-"
    lines = []
    for job in jobs[:FATES_SHOWN]:
        story = " → ".join(f"w{c['worker']:02d} a{c['attempt']} +{c['claimed_at_s']:.2f}s {c['outcome']}"
                           for c in job["claims"])
        last = job["claims"][-1] if job["claims"] else None
        unseen = (last is not None and last["outcome"] == "live" and job["final_status"] == "done"
                  and job["final_attempts"] == last["attempt"])
        note = " (its completion committed before the kill; the record died with the worker)" if unseen else ""
        lines.append(f"job {job['job']}: {story} ⇒ {job['final_status']}{note}")
    if len(jobs) > FATES_SHOWN:
        lines.append(f"… and {len(jobs) - FATES_SHOWN} more")
    return "\n".join(lines)
