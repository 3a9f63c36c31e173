"""`claimcheck compare BASE.json NEW.json`: what changed between two reports, as a CI gate.

Exit 1 when a run's exactly-once verdict went from true to false, or its median throughput fell by
more than `--max-drop` percent and the fall is significant over the repetitions (`bench --repeat`);
0 otherwise; 2 when a file is missing or not a valid claimcheck report, an option is out of range,
or the two reports share no run (an unusable comparison).
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path

from rich.console import Console
from rich.text import Text

from pg_claimcheck.commands import VERBS
from pg_claimcheck.commands._options import add_wide_option
from pg_claimcheck.report.compare import DEFAULT_ALPHA, DEFAULT_MAX_DROP_PCT, compare, comparison_table
from pg_claimcheck.report.reader import load_report


def percent(text: str) -> float:
    try:
        value = float(text.strip().rstrip("%"))
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 <= value <= 100):
        raise argparse.ArgumentTypeError(f"expected a percentage from 0 to 100 like 20 or 20%, got {text!r}")
    return value


def probability(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 < value < 1):
        raise argparse.ArgumentTypeError(f"expected a probability between 0 and 1 like 0.01, got {text!r}")
    return value


def register(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser("compare", help=VERBS["compare"],
                         description="Exit 0: no regression; 1: a verdict went from exactly-once to violated, or "
                                     "throughput fell past --max-drop and significantly; 2: a file is missing or "
                                     "not a valid report, or the reports share no run.")
    p.add_argument("base", type=Path, help="the baseline report (JSON from bench or check --json)")
    p.add_argument("new", type=Path, help="the report to judge against it")
    p.add_argument("--max-drop", type=percent, default=DEFAULT_MAX_DROP_PCT, metavar="PCT",
                   help=f"largest median throughput drop tolerated, in percent (default {DEFAULT_MAX_DROP_PCT:g})")
    p.add_argument("--alpha", type=probability, default=DEFAULT_ALPHA, metavar="P",
                   help="a drop past --max-drop is a regression only if the one-sided Mann-Whitney U test over "
                        f"the repetitions gives p <= P (default {DEFAULT_ALPHA:g}); reports need `bench --repeat 5` "
                        "or more for the test, else the threshold alone judges")
    add_wide_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, console: Console, err: Console) -> int:
    base, new = load_report(args.base), load_report(args.new)
    comparison = compare(base, new, args.max_drop, args.alpha)
    for warning in comparison.warnings:
        err.print(f"claimcheck: warning: {warning}.", highlight=False, markup=False)
    console.print(comparison_table(comparison, f"claimcheck compare: {args.base} → {args.new} "
                                               f"(max drop {args.max_drop:g}%, alpha {args.alpha:g})",
                                   wide=args.wide or not console.is_terminal))
    if regressions := comparison.regressions:
        console.print(Text(f"{len(regressions)} regression(s)", style="bold red"),
                      Text("; ".join(f"{' · '.join(map(str, d.key))} {d.status.lower()}" for d in regressions)),
                      sep=": ", highlight=False)
        return 1
    console.print("[bold green]no regression[/]")
    return 0
