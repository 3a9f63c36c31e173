"""pgbench parity, printed, never asserted (run: .venv/bin/python tests/benchmarks/pgbench_parity.py [RUNS]).

Runs `claimcheck bench --pgbench` for skip-locked, zero work time, 20,000 jobs (batch 10), in both
modes (lease, lock) at 1, 8 and 16 workers, RUNS times (default 5), and prints each ratio and, per
cell, the median and the range. The machine is shared, so one figure says little: read the median
and the range, and the load average printed with every sweep.
Uses $CLAIMCHECK_DSN when set, else an embedded server per sweep.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

MODES = ("lease", "lock")
WORKERS = (1, 8, 16)
BENCH = ["bench", "--strategies", "skip-locked", "--workers", ",".join(map(str, WORKERS)),
         "--mode", ",".join(MODES), "--work-ms", "0", "--jobs", "20000", "--pgbench"]


def one_sweep(scratch: Path) -> list[dict]:
    """Every cell once (one `bench` invocation)."""
    out = scratch / "parity.json"
    done = subprocess.run([sys.executable, "-m", "claimcheck", *BENCH, "--json", str(out)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"bench failed (exit {done.returncode}): {done.stderr.strip()[-500:]}")
    return json.loads(out.read_text())["runs"]


def main(runs: int) -> None:
    ratios: dict[tuple[str, int], list[float]] = {(m, w): [] for m in MODES for w in WORKERS}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(runs):
            load = os.getloadavg()
            for run in one_sweep(Path(tmp)):
                ratios[(run["mode"], int(run["workers"]))].append(run["pgbench_ratio"])
                print(f"sweep {i + 1} (load {load[0]:.2f}): {run['mode']:5} {run['workers']:>2} workers: "
                      f"claimcheck {run['throughput_jobs_per_s']:,.0f} jobs/s, "
                      f"pgbench {run['pgbench_jobs_per_s']:,.0f} jobs/s, ratio {run['pgbench_ratio']:.2f}")
    print(f"\npgbench_ratio over {runs} runs: median (min-max)")
    print("| mode | " + " | ".join(f"{w} worker{'s' * (w > 1)}" for w in WORKERS) + " |")
    print("|---|" + "---|" * len(WORKERS))
    for mode in MODES:
        cells = [ratios[(mode, w)] for w in WORKERS]
        print(f"| {mode} | " + " | ".join(f"{statistics.median(c):.2f} ({min(c):.2f}-{max(c):.2f})" for c in cells) + " |")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
