"""Library parity, printed, never asserted (run: .venv/bin/python tests/benchmarks/lib_parity.py [RUNS] [--jobs N]
[--libs a,b]).

Runs `claimcheck bench --libs procrastinate,pgqueuer,saq,graphile-worker,pg-boss --workers 1,4,8 --work-ms 0
--pgbench` RUNS times (default 3): each library through its own workers, then one cycle of its worker with its own
statements through pgbench, at 1, 4 and 8 workers (clients). Prints every run, then per library and
worker count the median and range of the library's jobs/s, of pgbench's, and of the ratio, and the
verdicts. The machine is shared, so one figure says little: read the median and the range, and the
load average printed with every sweep. Uses $CLAIMCHECK_DSN when set, else an embedded server per sweep.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

LIBS = ("procrastinate", "pgqueuer", "saq", "graphile-worker", "pg-boss")
WORKERS = (1, 4, 8)
DEFAULT_JOBS = 5_000


def one_sweep(scratch: Path, libs: list[str], jobs: int) -> list[dict]:
    """Every library x worker count once (one `bench` invocation)."""
    out = scratch / "lib_parity.json"
    command = ["bench", "--libs", ",".join(libs), "--workers", ",".join(map(str, WORKERS)), "--work-ms", "0",
               "--jobs", str(jobs), "--pgbench", "--json", str(out)]
    done = subprocess.run([sys.executable, "-m", "pg_claimcheck", *command], capture_output=True, text=True)
    if done.returncode not in (0, 1):  # 1: a library broke its promise, which the table shows
        raise SystemExit(f"bench failed (exit {done.returncode}): {done.stderr.strip()[-500:]}")
    return json.loads(out.read_text())["runs"]


def cell(values: list[float], digits: int = 0) -> str:
    return f"{statistics.median(values):,.{digits}f} ({min(values):,.{digits}f}-{max(values):,.{digits}f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="?", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=DEFAULT_JOBS)
    parser.add_argument("--libs", default=",".join(LIBS))
    args = parser.parse_args()
    libs = args.libs.split(",")
    seen: dict[tuple[str, int], dict[str, list]] = {}
    versions: dict[str, str] = {}
    loads = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            load = os.getloadavg()
            loads.append(load[0])
            for run in one_sweep(Path(tmp), libs, args.jobs):
                name, workers = run["strategy"], int(run["workers"])
                versions[name] = run["library"]["version"]
                got = seen.setdefault((name, workers), {"lib": [], "pgbench": [], "ratio": [], "verdict": []})
                got["lib"].append(run["throughput_jobs_per_s"])
                got["pgbench"].append(run["pgbench_jobs_per_s"] or 0.0)
                got["ratio"].append(run["pgbench_ratio"] or 0.0)
                got["verdict"].append("exactly-once" if run["exactly_once"] else "VIOLATED")
                print(f"sweep {i + 1} (load {load[0]:.2f}): {name} {workers}w: library "
                      f"{run['throughput_jobs_per_s']:,.0f} jobs/s, its SQL through pgbench "
                      f"{run['pgbench_jobs_per_s'] or 0:,.0f} jobs/s, ratio {run['pgbench_ratio'] or 0:.2f}, "
                      f"{got['verdict'][-1]}")
    print(f"\n{args.runs} run(s) of {args.jobs:,} jobs, work 0 ms; 1-minute load average at the sweeps' starts "
          f"{min(loads):.2f}-{max(loads):.2f} on {os.cpu_count()} CPUs. median (min-max)\n")
    print("| library | workers | library jobs/s | pgbench jobs/s (its SQL) | ratio | verdicts |")
    print("|---|---|---|---|---|---|")
    for (name, workers), got in sorted(seen.items(), key=lambda kv: (libs.index(kv[0][0]), kv[0][1])):
        verdicts = ", ".join(f"{v} x{got['verdict'].count(v)}" for v in sorted(set(got["verdict"])))
        print(f"| {name} {versions[name]} | {workers} | {cell(got['lib'])} | {cell(got['pgbench'])} | "
              f"{cell(got['ratio'], 2)} | {verdicts} |")


if __name__ == "__main__":
    main()
