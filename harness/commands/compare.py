"""`claimcheck compare BASE.json NEW.json`: what changed between two reports, as a CI gate.

Exit 1 when a run's exactly-once verdict went from true to false or its throughput fell by
more than `--max-drop` percent; 0 otherwise; 2 when a file is missing or not a claimcheck report.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from claimcheck.compare import DEFAULT_MAX_DROP_PCT, compare, comparison_table, load_report


def percent(text: str) -> float:
    try:
        return float(text.strip().rstrip("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a percentage like 20 or 20%, got {text!r}") from None


def register(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser("compare", help="differences between two JSON reports; exit 1 on a regression")
    p.add_argument("base", type=Path, help="the baseline report (JSON from bench or check --json)")
    p.add_argument("new", type=Path, help="the report to judge against it")
    p.add_argument("--max-drop", type=percent, default=DEFAULT_MAX_DROP_PCT, metavar="PCT",
                   help=f"largest throughput drop tolerated, in percent (default {DEFAULT_MAX_DROP_PCT:g})")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, console: Console, err: Console) -> int:
    base, new = load_report(args.base), load_report(args.new)
    comparison = compare(base, new, args.max_drop)
    console.print(comparison_table(comparison, f"claimcheck compare: {args.base} → {args.new} "
                                               f"(max drop {args.max_drop:g}%)"))
    if regressions := comparison.regressions:
        console.print(f"[bold red]{len(regressions)} regression(s)[/]: "
                      + "; ".join(f"{' · '.join(map(str, d.key))} {d.status.lower()}" for d in regressions))
        return 1
    console.print("[bold green]no regression[/]")
    return 0
