"""pgbench parity, printed, never asserted (run: .venv/bin/python tests/benchmarks/pgbench_parity.py [RUNS]).

Runs `claimcheck bench --pgbench` for skip-locked, 8 workers, zero work time, lease mode,
20,000 jobs (batch 10) RUNS times (default 5) and prints each ratio and the spread. The
machine is shared, so one figure says little: read the median and the range.
Uses $CLAIMCHECK_DSN when set, else an embedded server per run.
"""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = ["bench", "--strategies", "skip-locked", "--workers", "8", "--mode", "lease", "--work-ms", "0",
         "--jobs", "20000", "--pgbench"]


def one_run(scratch: Path) -> dict:
    out = scratch / "parity.json"
    done = subprocess.run([sys.executable, "-m", "claimcheck", *BENCH, "--json", str(out)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"bench failed (exit {done.returncode}): {done.stderr.strip()[-500:]}")
    (run,) = json.loads(out.read_text())["runs"]
    return run


def main(runs: int) -> None:
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(runs):
            run = one_run(Path(tmp))
            ratios.append(run["pgbench_ratio"])
            print(f"run {i + 1}: claimcheck {run['throughput_jobs_per_s']:,.0f} jobs/s, "
                  f"pgbench {run['pgbench_jobs_per_s']:,.0f} jobs/s, ratio {run['pgbench_ratio']:.2f}")
    print(f"pgbench_ratio over {runs} runs: median {statistics.median(ratios):.2f}, "
          f"min {min(ratios):.2f}, max {max(ratios):.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
