"""Verdict power, printed, never asserted (run: .venv/bin/python tests/benchmarks/power.py).

For every design of the field corpus (tests/field/*.sql, each with its `expected` header) and every
built-in: `claimcheck check DESIGN` N times at each worker count of `--workers` (default: the
check's default, then 2, a CI runner's size), and prints per design and worker count the detection
rate (runs VIOLATED / runs; for a safe design, a VIOLATED run is a false alarm), the median wall
seconds to the verdict, the conditions that caught it, and for a `held` the power figures the
report gives (overlapping claims, the probability statement), from the JSON.

Options: `--runs N` (default 10), `--jobs J` passes `--jobs` (default: the check's own), `--only
a,b` keeps designs named one of these, or whose name contains one that names no design, `--cap
SECONDS` ends a run that takes longer (Ctrl-C, so it cleans up; counted as a run without a verdict), `--plans` passes `--plans`.
The expected verdict is read from the file's header only to label the row (caught / false alarm);
the verdict itself is the check's. Wall times on a shared machine are noisy: the load average is printed per row.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from pg_claimcheck.scenarios import SCENARIO_DIR, builtin_names
from time_to_verdict import check_json

FIELD = Path(__file__).parents[1] / "field"


def designs(only: list[str]) -> list[tuple[str, str, str]]:
    """(name, argument for check, expected) for the field corpus's .sql files and the built-ins."""
    found = []
    for path in sorted(FIELD.glob("*.sql")):
        found.append((path.stem, str(path), _expected(path)))
    for name in builtin_names():
        found.append((name, name, _expected(SCENARIO_DIR / f"{name.replace('-', '_')}.sql")))
    partial = [o for o in only if o not in {d[0] for d in found}]  # whole names select themselves alone
    return [d for d in found if not only or d[0] in only or any(o in d[0] for o in partial)]


def _expected(path: Path) -> str:
    match = re.search(r"^-- expected: (\w+)", path.read_text(), re.M)
    return match.group(1) if match else "?"


def one(target: str, workers: int | None, jobs: int | None, plans: str | None, cap: float) -> dict:
    options = ["--workers", str(workers)] if workers else []
    options += ["--jobs", str(jobs)] if jobs else []
    options += ["--plans", plans] if plans else []
    code, seconds, _, doc = check_json(target, options, cap)
    caught_by = [c["condition"] for c in doc.get("conditions", []) if c["verdict"] == "VIOLATED"]
    if not doc.get("conditions") and any(not r["exactly_once"] for r in doc.get("runs", [])):
        caught_by = ["as-seeded"]
    return {"exit": code, "seconds": seconds, "caught_by": caught_by, "power": doc.get("power")}


def power_words(power: dict | None) -> str:
    if not power:
        return "-"
    p = power.get("detect_1_in_100", 0)
    return f"{power.get('overlapping_claims', 0):,} of {power.get('claims', 0):,} overlapping; " + \
        ("p > 0.99" if p > 0.99 else f"p >= {p:.2f}") + " (a race in 1 of 100)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--workers", default="default,2", help="worker counts, comma-separated ('default': the check's)")
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--only", default="")
    parser.add_argument("--plans", default=None)
    parser.add_argument("--cap", type=float, default=300.0)
    args = parser.parse_args()
    counts = [None if w == "default" else int(w) for w in args.workers.split(",")]
    print(f"# runs per cell: {args.runs}; jobs: {args.jobs or 'default'}; load at start: {os.getloadavg()[0]:.1f}")
    print(f"{'design':48} {'expected':8} {'workers':>7} {'caught':>7} {'median s':>8} {'load':>5}  "
          f"{'caught by':30} power of a held")
    for name, target, expected in designs([o for o in args.only.split(",") if o]):
        for workers in counts:
            runs = [one(target, workers, args.jobs, args.plans, args.cap) for _ in range(args.runs)]
            caught = sum(1 for r in runs if r["exit"] == 1)
            by: dict[str, int] = {}
            for r in runs:
                for c in r["caught_by"]:
                    by[c] = by.get(c, 0) + 1
            held = [r for r in runs if r["exit"] == 0]
            odd = sum(1 for r in runs if r["exit"] not in (0, 1))
            print(f"{name:48} {expected:8} {workers or 'default':>7} {caught:>3}/{len(runs):<3} "
                  f"{statistics.median(r['seconds'] for r in runs):8.1f} {os.getloadavg()[0]:5.1f}  "
                  f"{','.join(f'{k}:{v}' for k, v in by.items()) or '-':30} "
                  f"{power_words(held[0]['power']) if held else '-'}{f' ({odd} without a verdict)' if odd else ''}",
                  flush=True)


if __name__ == "__main__":
    main()
