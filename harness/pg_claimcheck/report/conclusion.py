"""What a report concludes: which runs held, what to pick and why. One home for the reasoning, which
the terminal (the last lines of `bench`, `check` and `lib`) and the HTML report's summary box both show.

It reads the JSON report's run objects (and a rate sweep's knees), so the HTML, made from the JSON
alone, says exactly what the terminal said. A conclusion is a list of lines made of parts, each part
plain or strong; the two renderers only set them in type.

A run that did not hold either violated exactly-once (safety: a job handed out twice, lost, over-claimed)
or made no progress within its limits (liveness: no job finished, a retry not yet due, the server ending
the sessions; pg_claimcheck.verdict.liveness). Only the first says "do not use it": the second names its
cause and says the run showed the design neither unsafe nor safe.
"""
from __future__ import annotations

from dataclasses import dataclass
from html import escape

from rich.console import Group
from rich.table import Table
from rich.text import Text

from pg_claimcheck.verdict.liveness import HELD, NO_PROGRESS, VIOLATED, run_outcome
from pg_claimcheck.verdict.result import AS_SEEDED, run_condition

Part = tuple[str, bool]
"""A piece of a line: its text and whether it is strong (bold)."""


@dataclass(frozen=True)
class Conclusion:
    head: tuple[Part, ...]
    items: tuple[tuple[Part, ...], ...]
    held: int
    runs: int
    violated: int = 0
    """Runs that violated exactly-once (safety); the others that did not hold made no progress (liveness)."""

    @property
    def mostly_held(self) -> bool:
        """More runs held than violated: the summary may look reassuring (green), else alarming."""
        return self.held * 2 > self.runs


def _pct(value: float, reference: float) -> str:
    return f"{(value / reference - 1) * 100:+.0f} %" if reference else "-"


def _rate(run: dict) -> str:
    n = len(run.get("repetitions") or ())
    return f"{run['throughput_jobs_per_s']:,.0f} jobs/s" + (f" (median of {n})" if n > 1 else "")


def _plural(n: int, one: str, many: str) -> str:
    return f"{n:,} {one if n == 1 else many}"


def conclude(runs: list[dict], knees: list[dict] | None = None) -> Conclusion | None:
    """Which runs held, the fastest strategy that held in every run of a mode, and what the others cost.

    A strategy (with its batch) counts for a mode only if every one of its runs in that mode held
    exactly-once: a claim that breaks at 4 workers is not safe at 1. Its best run stands for it, and
    a planner condition's run counts for the verdict, not for speed (a short run on a small table).
    A rate sweep's (`knees`) runs are ranked by their knees instead: their jobs/s is the offered rate."""
    if not runs:
        return None
    held = [r for r in runs if run_outcome(r) == HELD]
    violated = [r for r in runs if run_outcome(r) == VIOLATED]
    stalled = [r for r in runs if run_outcome(r) == NO_PROGRESS]
    head: list[Part] = [(f"{len(held)} of {_plural(len(runs), 'run', 'runs')} held exactly-once.", True)]
    if violated:
        doubles = sum(r["double_claimed_jobs"] for r in violated)
        lost = sum(r["unclaimed_jobs"] for r in violated)
        names = sorted({r["strategy"] for r in violated})
        head.append((f" Violated: {', '.join(names)} ({_plural(len(violated), 'run', 'runs')}; "
                     f"{_plural(doubles, 'job', 'jobs')} handed to more than one worker"
                     f"{f', {lost:,} never claimed' if lost else ''}): do not use "
                     f"{'it' if len(names) == 1 else 'them'} as run, however fast.", False))
    if stalled:
        names = sorted({r["strategy"] for r in stalled})
        cause = stalled[0].get("liveness") or "it did not finish its jobs within its limits"
        more = f" (and {_plural(len(stalled) - 1, 'other run', 'other runs')})" if len(stalled) > 1 else ""
        head.append((f" No progress: {', '.join(names)} ({_plural(len(stalled), 'run', 'runs')}; no job handed "
                     f"out twice or lost): {cause}{more}. A liveness failure, not a double claim: "
                     f"{'it shows' if len(stalled) == 1 else 'they show'} the design neither unsafe nor safe "
                     "at these settings.", False))
    items: list[tuple[Part, ...]] = [] if not knees else [
        ((f"{k['strategy']} · {k['mode']} · b{k['batch']} · {k['workers']}w", True),
         (f": knee {k['summary']} (pickup p99 ≤ {k['latency_slo_ms']:g} ms)", False))
        for k in sorted(knees, key=lambda k: -(k["knee_rate_per_s"] or 0))]
    for mode in sorted({r["mode"] for r in runs}) if not knees else ():
        items.append(tuple(_mode_line(mode, [r for r in runs if r["mode"] == mode])))
    return Conclusion(tuple(head), tuple(items), len(held), len(runs), len(violated))


def _mode_line(mode: str, runs: list[dict]) -> list[Part]:
    groups: dict[str, list[dict]] = {}
    for r in runs:
        groups.setdefault(f"{r['strategy']} · b{r['batch']}", []).append(r)
    outcomes = {name: {run_outcome(r) for r in rs} for name, rs in groups.items()}
    safe = {name: max(rs, key=lambda r: (run_condition(r) == AS_SEEDED, r["throughput_jobs_per_s"]))
            for name, rs in groups.items() if outcomes[name] == {HELD}}
    stalled = [name for name, seen in outcomes.items() if NO_PROGRESS in seen and VIOLATED not in seen]
    if not safe and not stalled:
        what = "no strategy held" if len(groups) > 1 else f"{next(iter(groups))} did not hold"
        return [(f"{mode} mode:", True), (f" {what} exactly-once in every run; nothing here is safe to "
                                          "pick as run (the evidence says how it broke).", False)]
    if not safe:
        broken = [name for name in groups if name not in stalled]
        return [(f"{mode} mode:", True), (
            f" {', '.join(stalled)} made no progress in {'a run' if len(stalled) == 1 else 'runs'} (a liveness "
            "failure: no double claim was seen, and none was ruled out)"
            + (f"; {', '.join(broken)} violated exactly-once" if broken else "")
            + ". Nothing here is shown safe to pick as run: the cause is named above.", False)]
    ranked = sorted(safe.items(), key=lambda kv: -kv[1]["throughput_jobs_per_s"])
    (best_name, best), others = ranked[0], ranked[1:]
    every = " in every run" if len(groups[best_name]) > 1 else ""
    if len(groups) > 1:
        line = [(f"{mode} mode: pick {best_name}", True), (f", the fastest that held{every}: ", False)]
    else:
        conditions = sum(1 for r in groups[best_name] if r.get("condition"))
        tried = f" ({_plural(conditions, 'planner condition', 'planner conditions')})" if conditions else ""
        line = [(f"{mode} mode: {best_name}", True), (f" held{every}{tried}: ", False)]
    text = f"{_rate(best)} at {_plural(best['workers'], 'worker', 'workers')}."
    if others:
        text += " The others that held, at their best: " + "; ".join(
            f"{name} {_rate(r)} at {r['workers']} ({_pct(r['throughput_jobs_per_s'], best['throughput_jobs_per_s'])})"
            for name, r in others) + "."
    fast_but_bad = [name for name, rs in groups.items() if name not in safe
                    and max(r["throughput_jobs_per_s"] for r in rs) > best["throughput_jobs_per_s"]]
    if violated := [name for name in fast_but_bad if name not in stalled]:
        text += f" Faster but violated: {', '.join(violated)} (does not count)."
    if slow := [name for name in fast_but_bad if name in stalled]:
        text += f" Faster but made no progress in a run: {', '.join(slow)} (not shown safe; does not count)."
    believed_unsafe = [name for name, r in ranked if r.get("expected") == "unsafe"]
    if believed_unsafe:
        text += (f" Believed unsafe though no violation was seen here: {', '.join(believed_unsafe)}; "
                 "a run that did not catch a race is no proof there is none.")
    return [*line, (text, False)]


def as_html(found: Conclusion | None) -> str:
    """The HTML report's summary box: green only when most runs held."""
    if found is None:
        return ""

    def line(parts) -> str:
        return "".join(f"<b>{escape(t)}</b>" if strong else escape(t) for t, strong in parts)

    css = "conclusion" if found.mostly_held else "conclusion none"
    items = "".join(f"<li>{line(item)}</li>" for item in found.items)
    return f'<div class="{css}"><p>{line(found.head)}</p><ul>{items}</ul></div>'


def as_text(found: Conclusion | None) -> Group:
    """The terminal's last lines: the head, then one bullet per mode (or knee) with a hanging indent,
    wrapped to the console's width."""
    if found is None:
        return Group()
    # Red for a violation with nothing held; a liveness failure alone is a warning, not an alarm.
    style = ("bold green" if found.held == found.runs else "bold red" if found.violated and not found.held
             else "bold yellow")
    head = Text.assemble(*((text, style if strong else "") for text, strong in found.head))
    bullets = Table.grid()
    bullets.add_column(width=2, no_wrap=True)
    bullets.add_column()
    for item in found.items:
        bullets.add_row("- ", Text.assemble(*((text, "bold" if strong else "") for text, strong in item)))
    return Group(head, bullets)
