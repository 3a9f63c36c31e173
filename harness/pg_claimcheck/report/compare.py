"""Comparing two JSON reports: did a change break exactly-once, or cost throughput?

Runs are matched by (strategy, mode, workers, batch). A match regresses when its exactly-once
verdict went from true to false, or when its throughput fell by more than the allowed share
*and* the fall is significant: a one-sided Mann-Whitney U test over the repetitions of both sides
(`bench --repeat N`) gives p <= alpha (default 0.01). One figure per side cannot tell a change from noise (two
identical back-to-back runs on a busy 2-core machine differed by +43 % and +114 %), so when the
repetitions are too few for the test to ever reach alpha the threshold alone judges, and the
output says so. A run that held, and whose power (its claims that overlapped another claim,
pg_claimcheck.verdict.power) fell by more than half, is flagged as a regression too: its `held` says
less than its base's did. Runs present on one side only are shown, never judged: a sweep may grow or shrink;
but two reports that share no run are an unusable comparison, never "no regression".

Reports are read by `pg_claimcheck.report.reader`, which checks them against the published schema as
they stream: a malformed one is a UsageError naming the file and the field. Pure functions of the two
documents.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from rich import box
from rich.table import Table
from rich.text import Text

from pg_claimcheck.errors import UsageError
from pg_claimcheck.report.reader import RunKey, check_distinct_runs, run_key, shown_key
from pg_claimcheck.verdict.liveness import HELD, NO_PROGRESS, VIOLATED, WORDS, run_outcome
from pg_claimcheck.verdict.power import weakened
from pg_claimcheck.verdict.result import AS_SEEDED
from pg_claimcheck.verdict.stats import mann_whitney_less, median, spread

DEFAULT_MAX_DROP_PCT = 20.0
DEFAULT_ALPHA = 0.01
"""One-sided significance level of the U test. Chosen from tests/benchmarks/compare_guard.py on a
shared 2-core machine: over 27 comparisons of identical configurations, 0.05 let 4 drifts through
(two at p = 0.048), 0.01 let 2; the doubled cycle time gave p = 0.004 (5 + 5 repetitions, complete
separation) in 23 of the 24 it caught. It needs at least 5 + 4 repetitions (1/C(9, 4) < 0.01)."""
SETTINGS_COMPARED = ("jobs", "work_ms", "poll_ms", "lease_seconds", "duration", "claims_per_worker", "fail_rate",
                     "pgbench")
"""Settings that change what a run's throughput means; a difference is warned about, not refused."""

LOAD_DIFFERENCE_PER_CPU = 1.0
LOAD_RATIO = 1.5
"""Warn when the two reports' 1-minute load averages differ by more than one per CPU and by half."""



def samples(run: dict) -> list[float]:
    """A run's throughput per repetition (one figure for a report without repetitions)."""
    return [float(r["throughput_jobs_per_s"]) for r in run["repetitions"]] or [float(run["throughput_jobs_per_s"])]


def smallest_p(n: int, m: int) -> float:
    """The smallest p-value the exact U test can give with n and m samples (all new below all base)."""
    return 1 / math.comb(n + m, n)


@dataclass(frozen=True)
class RunDiff:
    """One strategy x setting, as it was and as it is."""

    key: RunKey
    base: dict | None
    new: dict | None
    max_drop_pct: float
    alpha: float = DEFAULT_ALPHA

    @property
    def change_pct(self) -> float | None:
        """Median throughput change in percent of the base's median (negative = slower)."""
        if self.base is None or self.new is None:
            return None
        base = median(samples(self.base))
        return None if not base else (median(samples(self.new)) / base - 1) * 100

    @property
    def testable(self) -> bool:
        """Enough repetitions on both sides for the U test to be able to reach alpha."""
        return bool(self.base and self.new) and smallest_p(len(samples(self.new)), len(samples(self.base))) <= self.alpha

    @cached_property  # the exact test enumerates splits: once per run, not per use
    def p_value(self) -> float | None:
        """One-sided p of "new is slower", when both sides have enough repetitions to test."""
        return mann_whitney_less(samples(self.new), samples(self.base)) if self.testable else None

    @property
    def condition(self) -> str:
        return self.key[4]

    @property
    def verdict_regressed(self) -> bool:
        """Held and now violated; or a planner condition's run that fails where the base has none
        (a base made without conditions, or before they existed, never ran it: it newly fails)."""
        if self.new is None or self.new["exactly_once"]:
            return False
        if self.base is None:
            return self.condition != AS_SEEDED
        return bool(self.base["exactly_once"])

    @property
    def weakened(self) -> bool:
        """A held run whose overlapping claims fell by more than half against its base's: its `held` says
        less than the base's did (pg_claimcheck.verdict.power)."""
        if self.base is None or self.new is None or not self.new["exactly_once"]:
            return False
        return weakened(self.base.get("power"), self.new.get("power"))

    @property
    def past_threshold(self) -> bool:
        change = self.change_pct
        return change is not None and -change > self.max_drop_pct

    @property
    def slower(self) -> bool:
        """Past the threshold, and significant (or too few repetitions to test: the threshold alone).
        A planner condition's run is a short run on a small table: its verdict counts, its jobs/s is noise."""
        if not self.past_threshold or self.condition != AS_SEEDED:
            return False
        p = self.p_value
        return p is None or p <= self.alpha

    @property
    def status(self) -> str:
        if self.base is None:
            return "NEWLY FAILS" if self.verdict_regressed else "new"
        if self.new is None:
            return "gone"
        if self.verdict_regressed:
            return "VERDICT REGRESSED"
        if self.slower:
            return "SLOWER"
        if self.weakened:
            return "POWER FELL"
        if self.past_threshold:
            return "ok (within noise)"
        return "ok"


@dataclass(frozen=True)
class Comparison:
    diffs: tuple[RunDiff, ...]
    max_drop_pct: float
    warnings: tuple[str, ...] = ()

    @property
    def regressions(self) -> list[RunDiff]:
        return [d for d in self.diffs if d.verdict_regressed or d.slower or d.weakened]

    @property
    def regressed(self) -> bool:
        return bool(self.regressions)


def check_limits(max_drop_pct: float, alpha: float) -> None:
    if not (math.isfinite(max_drop_pct) and 0 <= max_drop_pct <= 100):
        raise UsageError(f"--max-drop must be a percentage from 0 to 100, got {max_drop_pct}")
    if not (math.isfinite(alpha) and 0 < alpha < 1):
        raise UsageError(f"--alpha must be a probability between 0 and 1, got {alpha}")


def warnings_between(base: dict, new: dict) -> list[str]:
    """What differs between the two reports' servers and settings, so a change may not be the code's."""
    found = []
    versions = [doc.get("postgres", {}).get("version") for doc in (base, new)]
    if versions[0] != versions[1]:
        found.append(f"the reports come from different PostgreSQL versions ({versions[0]} → {versions[1]})")
    sources = [doc.get("postgres", {}).get("source") for doc in (base, new)]
    if sources[0] != sources[1]:
        found.append(f"the reports come from different kinds of server ({sources[0]} → {sources[1]})")
    settings = [doc.get("settings", {}) for doc in (base, new)]
    changed = [f"{k} {settings[0].get(k)!r} → {settings[1].get(k)!r}" for k in SETTINGS_COMPARED
               if settings[0].get(k) != settings[1].get(k)]
    if changed:
        found.append("the reports were made with different settings: " + ", ".join(changed))
    platforms = [doc.get("machine", {}).get("platform") for doc in (base, new)]
    if platforms[0] != platforms[1]:
        found.append(f"the reports come from different machines ({platforms[0]} → {platforms[1]})")
    loads = [doc.get("machine", {}).get("load_average_1m") for doc in (base, new)]
    cpus = new.get("machine", {}).get("cpus") or 1
    if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in loads) and \
            abs(loads[0] - loads[1]) > LOAD_DIFFERENCE_PER_CPU * cpus and max(loads) > LOAD_RATIO * min(loads):
        found.append(f"the machine was busier for one report than the other (1-minute load average {loads[0]:g} → "
                     f"{loads[1]:g}); the repetitions of one report cannot show that, so a change may be the load's")
    return found


def compare(base: dict, new: dict, max_drop_pct: float = DEFAULT_MAX_DROP_PCT,
            alpha: float = DEFAULT_ALPHA) -> Comparison:
    """Match the runs of two reports in the new report's order; two runs under one key are refused."""
    check_limits(max_drop_pct, alpha)
    check_distinct_runs(base, "the base report")
    check_distinct_runs(new, "the new report")
    base_runs = {run_key(run): run for run in base["runs"]}
    new_runs = {run_key(run): run for run in new["runs"]}
    if not base_runs or not new_runs:
        which = " and ".join(n for n, runs in (("the base", base_runs), ("the new report", new_runs)) if not runs)
        raise UsageError(f"unusable comparison: {which} has no runs")
    if not set(base_runs) & set(new_runs):
        raise UsageError("unusable comparison: no run of the new report matches one of the base (same strategy, "
                         f"mode, workers, batch, planner condition and offered rate); base has {_keys(base_runs)}, new has {_keys(new_runs)}")
    keys = list(new_runs) + [k for k in base_runs if k not in new_runs]
    diffs = tuple(RunDiff(k, base_runs.get(k), new_runs.get(k), max_drop_pct, alpha) for k in keys)
    warnings = warnings_between(base, new)
    untested = [d for d in diffs if d.base and d.new and not d.testable]
    if untested:
        warnings.append(f"{len(untested)} run(s) have too few repetitions for a significance test at alpha "
                        f"{alpha:g}; the --max-drop threshold alone judges them, and noise can trip it. "
                        "Record both reports with `bench --repeat 5` or more")
    return Comparison(diffs, max_drop_pct, tuple(warnings))


def _keys(runs: dict[RunKey, dict]) -> str:
    shown = ", ".join(shown_key(k) for k in list(runs)[:3])
    return shown + (f" and {len(runs) - 3} more" if len(runs) > 3 else "")


VERDICT_STYLES = {HELD: "green", VIOLATED: "bold red", NO_PROGRESS: "bold yellow"}


def _verdict(run: dict | None, held: str = WORDS[HELD]) -> Text:
    """A run's outcome in words (`held` for a held run): a liveness failure (schema 4) is no violation."""
    if run is None:
        return Text("-")
    outcome = run_outcome(run)
    return Text(held if outcome == HELD else WORDS[outcome], style=VERDICT_STYLES[outcome])


def _rate(run: dict | None) -> str:
    if run is None:
        return "-"
    values = samples(run)
    if len(values) == 1:
        return f"{values[0]:,.0f}"
    s = spread(values)
    return f"{s['median']:,.0f} ±{s['mad']:,.0f} (n={s['n']})"


def _compact_key(key: RunKey) -> Text:
    strategy, mode, workers, batch, condition, rate = key
    words = [strategy, mode, f"{workers}w", f"b{batch}"] + ([] if condition == AS_SEEDED else [f"under {condition}"])
    return Text(" ".join(words + ([] if rate is None else [f"at {rate:g}/s"])))


def _both(diff: RunDiff, cell) -> str:
    return " → ".join("-" if r is None else cell(r) for r in (diff.base, diff.new))


def _status_text(diff: RunDiff) -> Text:
    return Text(diff.status, style={"ok": "green", "ok (within noise)": "yellow", "new": "cyan",
                                    "gone": "yellow"}.get(diff.status, "bold red"))


def _change_text(diff: RunDiff) -> Text:
    change = diff.change_pct
    return Text("-" if change is None else f"{change:+.1f}%",
                style="bold red" if diff.slower else ("green" if change and change > 0 else ""))


COMPACT_CAPTION = "--wide: every column (the key's parts apart, the spread over repetitions)"


def comparison_table(comparison: Comparison, title: str, wide: bool = True) -> Table:
    """Every column with `wide` (a pipe, a CI log), else the ones that decide, in 80 columns: the run's
    key in one cell, base → new medians, the change and its p, the verdicts and the status."""
    if wide:
        return _wide_table(comparison, title)
    table = Table(title=Text(title), header_style="bold", title_justify="left", box=box.SIMPLE_HEAD, padding=0,
                  show_edge=False, caption=COMPACT_CAPTION, caption_justify="left")
    table.add_column("run", overflow="fold", min_width=14)
    table.add_column("jobs/s\nbase → new", justify="right", no_wrap=True)
    table.add_column("change", justify="right", no_wrap=True)
    table.add_column("p", justify="right", no_wrap=True)
    table.add_column("double\nclaimed", justify="right", no_wrap=True)
    table.add_column("verdict\nbase → new", overflow="fold", min_width=8)
    table.add_column("status", overflow="fold", min_width=8)
    for d in comparison.diffs:
        p = d.p_value
        verdicts = Text(" → ").join(_verdict(r, held="held") for r in (d.base, d.new))
        table.add_row(_compact_key(d.key), _both(d, lambda r: f"{median(samples(r)):,.0f}"), _change_text(d),
                      "-" if p is None else f"{p:.3f}", _both(d, lambda r: f"{r['double_claimed_jobs']:,}"),
                      verdicts, _status_text(d))
    return table


def _wide_table(comparison: Comparison, title: str) -> Table:
    table = Table(title=Text(title), header_style="bold", title_justify="left",
                  caption="jobs/s: median ±median absolute deviation over the repetitions; p: one-sided "
                          "Mann-Whitney U, new slower than base", caption_justify="left")
    rated = any(d.key[5] is not None for d in comparison.diffs)
    for name, justify in (("strategy", "left"), ("mode", "left"), ("workers", "right"), ("batch", "right"),
                          ("condition", "left"), *((("rate/s", "right"),) if rated else ()), ("base jobs/s", "right"), ("new jobs/s", "right"), ("change", "right"), ("p", "right"),
                          ("base verdict", "left"), ("new verdict", "left"), ("double claimed\nbase → new", "right"),
                          ("status", "left")):
        table.add_column(name, justify=justify, no_wrap=True)
    for d in comparison.diffs:
        # Text, not str: a strategy named `[/]` is a name, not rich markup (found by the compare fuzz test).
        key = d.key[:5] + ((("-" if d.key[5] is None else f"{d.key[5]:g}"),) if rated else ())
        table.add_row(*(Text(str(x)) for x in key), _rate(d.base), _rate(d.new), _change_text(d),
                      "-" if d.p_value is None else f"{d.p_value:.3f}", _verdict(d.base), _verdict(d.new),
                      _both(d, lambda r: f"{r['double_claimed_jobs']:,}"), _status_text(d))
    return table
