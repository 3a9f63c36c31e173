"""pgbench parity, printed, never asserted (run: .venv/bin/python tests/benchmarks/pgbench_parity.py [RUNS]).

Runs `claimcheck bench --pgbench` for skip-locked, zero work time, 20,000 jobs (batch 10), in both
modes (lease, lock) at 1, 8 and 16 workers, RUNS times (default 5), and prints each ratio and, per
cell, the median and the range. The machine is shared, so one figure says little: read the median
and the range, and the load average printed before every sweep (it includes the previous sweep's
own load).

Beside each ratio, what each job cost the clients' CPU: our workers' (summed over the worker
processes) against the pgbench process's, and the coordinator's share of the machine's CPU during
our run (sampler, progress and the streamed records: it must not take the server's CPU).
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


def bench_args(modes: tuple[str, ...], workers: tuple[int, ...], pgbench: bool = True) -> list[str]:
    """`claimcheck bench` over these cells of the parity benchmark (cpu_split.py runs one of them,
    python_floor.py runs each without pgbench, next to its own pgbench run)."""
    return ["bench", "--strategies", "skip-locked", "--workers", ",".join(map(str, workers)),
            "--mode", ",".join(modes), "--work-ms", "0", "--jobs", "20000", *(["--pgbench"] if pgbench else [])]


BENCH = bench_args(MODES, WORKERS)
CORES = os.cpu_count() or 1


def run_bench(scratch: Path, args: list[str]) -> list[dict]:
    """The runs of one `claimcheck` invocation (`bench_args`, and what else `args` adds), from its
    JSON report: every cell once here, one cell of our workers in python_floor.py."""
    out = scratch / "parity.json"
    done = subprocess.run([sys.executable, "-m", "pg_claimcheck", *args, "--json", str(out)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"bench failed (exit {done.returncode}): {done.stderr.strip()[-500:]}")
    return json.loads(out.read_text())["runs"]


def workers_us(run: dict) -> float:
    """What each job done cost our worker processes' CPU, in microseconds."""
    return run["cpu_s"]["workers"] / run["jobs_done"] * 1e6


def cell_figures(run: dict) -> dict:
    """The ratio, CPU per job (microseconds) of our workers and of pgbench, the coordinator's CPU share."""
    pgbench = run["pgbench"]
    return {"ratio": run["pgbench_ratio"],
            "ours_us": workers_us(run),
            "pgbench_us": pgbench["cpu_s"] / pgbench["jobs_done"] * 1e6,
            "coordinator": run["cpu_s"]["coordinator"] / (run["elapsed_s"] * CORES)}


def main(runs: int) -> None:
    cells: dict[tuple[str, int], list[dict]] = {(m, w): [] for m in MODES for w in WORKERS}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(runs):
            load = os.getloadavg()
            for run in run_bench(Path(tmp), BENCH):
                figures = cell_figures(run)
                cells[(run["mode"], int(run["workers"]))].append(figures)
                print(f"sweep {i + 1} (load {load[0]:.2f}): {run['mode']:5} {run['workers']:>2} workers: "
                      f"claimcheck {run['throughput_jobs_per_s']:,.0f} jobs/s, "
                      f"pgbench {run['pgbench_jobs_per_s']:,.0f} jobs/s, ratio {figures['ratio']:.2f}; "
                      f"client CPU per job {figures['ours_us']:.0f} us (pgbench {figures['pgbench_us']:.0f} us); "
                      f"coordinator {figures['coordinator']:.1%} of {CORES} cores", flush=True)

    table(cells, runs, "pgbench_ratio", "ratio", "{:.2f}")
    table(cells, runs, "our workers' CPU per job, us", "ours_us", "{:.0f}")
    table(cells, runs, "pgbench's CPU per job, us", "pgbench_us", "{:.0f}")
    table(cells, runs, f"the coordinator's share of the {CORES} cores during our run", "coordinator", "{:.1%}")


def table(cells: dict[tuple[str, int], list[dict]], runs: int, title: str, key: str, fmt: str) -> None:
    """One figure of every cell as a markdown table: median (min-max) over the runs (python_floor.py too)."""
    print(f"\n{title} over {runs} runs: median (min-max)")
    print("| mode | " + " | ".join(f"{w} worker{'s' * (w > 1)}" for w in WORKERS) + " |")
    print("|---|" + "---|" * len(WORKERS))
    for mode in MODES:
        values = [[c[key] for c in cells[(mode, w)]] for w in WORKERS]
        print(f"| {mode} | " + " | ".join(
            f"{fmt.format(statistics.median(v))} ({fmt.format(min(v))}-{fmt.format(max(v))})" for v in values) + " |")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
