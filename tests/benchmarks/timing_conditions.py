"""Which perturbation catches which race: runs per design x condition, printed, never asserted.

Run: .venv/bin/python tests/benchmarks/timing_conditions.py [--runs N] [--workers W] [--only a,b]

One server for all (embedded, or CLAIMCHECK_DSN), one run schema per design; each condition's short
run (pg_claimcheck.plans.explore, as `check` runs it, stopping at a proven violation) N times per
design, and per cell the runs VIOLATED of N and the median seconds of a run (its tables, plan and
workers). The conditions: `control` (the fresh 300-job table with no perturbation: what a plain
short run catches), the planner conditions of `--plans default`, and `snapshot-pause` at pauses of
0.5, 2, 5 and 10 ms (`snapshot-pause` is the default's 10 ms). `--file PATH` adds a design of your
own; `--que-without-recheck` adds que 0.14's design (tests/field) with its claim, the re-check of the
locked job in a new snapshot, replaced by the picked ids as they are: the race que's re-check
guards against (a pick whose snapshot predates another worker's DELETE takes the advisory lock
that worker released after its commit), made here from the field file, never kept as a case. For a safe design every VIOLATED is a
false alarm. The designs are those of tests/benchmarks/power.py (field corpus and built-ins).
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from power import designs  # noqa: E402

from pg_claimcheck.contract.strategy import load_strategy  # noqa: E402
from pg_claimcheck.plans.conditions import GENERIC, HISTORY, NESTED, SNAPSHOT_PAUSE, STALE, Condition  # noqa: E402
from pg_claimcheck.plans.explore import explore  # noqa: E402
from pg_claimcheck.plans.timing import PAUSE_SETTING  # noqa: E402
from pg_claimcheck.server.provision import provide_server  # noqa: E402
from pg_claimcheck.server.session import run_schema  # noqa: E402
from pg_claimcheck.settings import RunSettings  # noqa: E402

QUE = Path(__file__).parents[1] / "field" / "que_0_14_session_advisory.sql"
CONTROL = Condition("control", "a fresh 300-job table, nothing perturbed")


def paused(us: int) -> Condition:
    return dataclasses.replace(SNAPSHOT_PAUSE, name=f"pause-{us / 1000:g}ms", settings=((PAUSE_SETTING, str(us)),))


CONDITIONS = (CONTROL, STALE, NESTED, GENERIC, HISTORY, paused(500), paused(2000), paused(5000), SNAPSHOT_PAUSE)


def without_recheck(folder: Path) -> Path:
    """que 0.14's file with its claim returning the picked ids unchecked (see the module's doc)."""
    text = QUE.read_text()
    start, end = text.index("-- name: claim"), text.index("-- name: complete")
    path = folder / "que_0_14_without_recheck.sql"
    path.write_text(text[:start] + "-- name: claim\nSELECT unnest(%(job_id)s::bigint[]) AS job_id;\n\n" + text[end:])
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--only", default="")
    parser.add_argument("--conditions", default="", help="names, comma-separated (default: all)")
    parser.add_argument("--expected", default="", help="safe or unsafe: only the designs expected so")
    parser.add_argument("--file", action="append", default=[], help="a .sql file to measure too")
    parser.add_argument("--que-without-recheck", action="store_true")
    args = parser.parse_args()
    chosen = [c for c in CONDITIONS if not args.conditions or c.name in args.conditions.split(",")]
    settings = RunSettings(workers=args.workers, jobs=300, batch=10, stop_early=True)
    print(f"# runs per cell: {args.runs}; workers: {args.workers}; load at start: {os.getloadavg()[0]:.1f}")
    print(f"{'design':44} {'expected':8} " + " ".join(f"{c.name:>16}" for c in chosen) + "  load")
    with provide_server(dsn=os.environ.get("CLAIMCHECK_DSN")) as server, tempfile.TemporaryDirectory() as tmp:
        extra = [(Path(f).stem, f, "?") for f in args.file]
        if args.que_without_recheck:
            extra.append(("que_0_14_without_recheck", str(without_recheck(Path(tmp))), "unsafe"))
        for name, target, expected in designs([o for o in args.only.split(",") if o]) + extra:
            if args.expected and expected not in (args.expected, "?"):
                continue
            strategy = load_strategy(target)
            cells = []
            with run_schema(server) as (conn, run):
                for condition in chosen:
                    caught, seconds, na = 0, [], None
                    for _ in range(args.runs):
                        (outcome,) = explore(conn, server, run, strategy, settings, (condition,))
                        if outcome.verdict in ("not applicable", "skipped"):
                            na = outcome.verdict
                            break
                        caught += outcome.failed
                        seconds.append(outcome.seconds)
                    cells.append(na[:16] if na else f"{caught}/{len(seconds)} {statistics.median(seconds):5.1f}s")
            print(f"{name:44} {expected:8} " + " ".join(f"{c:>16}" for c in cells) + f"  {os.getloadavg()[0]:.1f}",
                  flush=True)


if __name__ == "__main__":
    main()
