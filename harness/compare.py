"""Comparing two JSON reports: did a change break exactly-once, or cost throughput?

Runs are matched by (strategy, mode, workers, batch). A match regresses when its exactly-once
verdict went from true to false, or when its throughput fell by more than the allowed share.
Runs present on one side only are shown, never judged: a sweep may grow or shrink.
Pure functions of the two documents, apart from reading the files.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from rich.table import Table
from rich.text import Text

from claimcheck.errors import UsageError, read_input

DEFAULT_MAX_DROP_PCT = 20.0
RUN_KEY_FIELDS = ("strategy", "mode", "workers", "batch")
REQUIRED_RUN_FIELDS = RUN_KEY_FIELDS + ("throughput_jobs_per_s", "exactly_once", "double_claimed_jobs")

RunKey = tuple[str, str, int, int]


@dataclass(frozen=True)
class RunDiff:
    """One strategy x setting, as it was and as it is."""

    key: RunKey
    base: dict | None
    new: dict | None
    max_drop_pct: float

    @property
    def change_pct(self) -> float | None:
        """Throughput change in percent of the base (negative = slower)."""
        if self.base is None or self.new is None or not self.base["throughput_jobs_per_s"]:
            return None
        return (self.new["throughput_jobs_per_s"] / self.base["throughput_jobs_per_s"] - 1) * 100

    @property
    def verdict_regressed(self) -> bool:
        return bool(self.base and self.new and self.base["exactly_once"] and not self.new["exactly_once"])

    @property
    def slower(self) -> bool:
        change = self.change_pct
        return change is not None and -change > self.max_drop_pct

    @property
    def status(self) -> str:
        if self.base is None:
            return "new"
        if self.new is None:
            return "gone"
        if self.verdict_regressed:
            return "VERDICT REGRESSED"
        if self.slower:
            return "SLOWER"
        return "ok"


@dataclass(frozen=True)
class Comparison:
    diffs: tuple[RunDiff, ...]
    max_drop_pct: float

    @property
    def regressions(self) -> list[RunDiff]:
        return [d for d in self.diffs if d.verdict_regressed or d.slower]

    @property
    def regressed(self) -> bool:
        return bool(self.regressions)


def load_report(path: Path) -> dict:
    """A claimcheck JSON report, or a UsageError that names the file and what is wrong."""
    text = read_input(path, UsageError)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not JSON ({exc.msg} at line {exc.lineno}); expected a claimcheck report "
                         "written by `claimcheck bench` or `check --json`") from None
    runs = doc.get("runs") if isinstance(doc, dict) else None
    if not isinstance(runs, list) or not all(isinstance(r, dict) for r in runs):
        raise UsageError(f"{path}: not a claimcheck report (no list of runs); expected the JSON written by "
                         "`claimcheck bench` or `check --json`")
    for index, run in enumerate(runs):
        missing = [f for f in REQUIRED_RUN_FIELDS if f not in run]
        if missing:
            raise UsageError(f"{path}: run {index} lacks {', '.join(missing)}; not a claimcheck report")
    return doc


def run_key(run: dict) -> RunKey:
    return (str(run["strategy"]), str(run["mode"]), int(run["workers"]), int(run["batch"]))


def compare(base: dict, new: dict, max_drop_pct: float = DEFAULT_MAX_DROP_PCT) -> Comparison:
    """Match the runs of two reports (the first of duplicate keys wins) in the new report's order."""
    if max_drop_pct < 0:
        raise UsageError(f"--max-drop cannot be negative, got {max_drop_pct}")
    base_runs: dict[RunKey, dict] = {}
    for run in base["runs"]:
        base_runs.setdefault(run_key(run), run)
    new_runs: dict[RunKey, dict] = {}
    for run in new["runs"]:
        new_runs.setdefault(run_key(run), run)
    keys = list(new_runs) + [k for k in base_runs if k not in new_runs]
    return Comparison(tuple(RunDiff(k, base_runs.get(k), new_runs.get(k), max_drop_pct) for k in keys), max_drop_pct)


def _verdict(run: dict | None) -> Text:
    if run is None:
        return Text("-")
    return Text("exactly-once", style="green") if run["exactly_once"] else Text("VIOLATED", style="bold red")


def _rate(run: dict | None) -> str:
    return "-" if run is None else f"{run['throughput_jobs_per_s']:,.0f}"


def comparison_table(comparison: Comparison, title: str) -> Table:
    table = Table(title=title, header_style="bold", title_justify="left")
    for name, justify in (("strategy", "left"), ("mode", "left"), ("workers", "right"), ("batch", "right"),
                          ("base jobs/s", "right"), ("new jobs/s", "right"), ("change", "right"),
                          ("base verdict", "left"), ("new verdict", "left"), ("double claimed\nbase → new", "right"),
                          ("status", "left")):
        table.add_column(name, justify=justify, no_wrap=True)
    for d in comparison.diffs:
        change = d.change_pct
        change_text = Text("-" if change is None else f"{change:+.1f}%",
                           style="bold red" if d.slower else ("green" if change and change > 0 else ""))
        doubles = " → ".join("-" if r is None else f"{r['double_claimed_jobs']:,}" for r in (d.base, d.new))
        status_style = {"ok": "green", "new": "cyan", "gone": "yellow"}.get(d.status, "bold red")
        table.add_row(*(str(x) for x in d.key), _rate(d.base), _rate(d.new), change_text, _verdict(d.base),
                      _verdict(d.new), doubles, Text(d.status, style=status_style))
    return table
