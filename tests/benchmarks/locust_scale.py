"""The Locust engine's reach on one box, printed, never asserted
(run: .venv/bin/python tests/benchmarks/locust_scale.py [USERS ...], default 250 500 1000; 0 for
only part 2).

1. Claimers per box: `claimcheck check skip-locked --engine locust --processes 2 --users N` for each
   N, against one embedded server started here with max_connections raised to fit (harness/
   pg_claimcheck/server/postmaster.py). For each: the users that connected, the users that committed at least one claim,
   the verdict, jobs/s and claim latency. "Sustained" = every user connected and claimed, and the
   ledger judged the run.
2. Client efficiency: jobs/s and jobs per client CPU-second ("per core": one core busy for one
   second) of the fork driver (`--workers N`) and of the Locust engine (`--users N --processes 2`)
   at 8 and 16 claimers on the same server, back to back. Client CPU is the rusage of the
   command's process tree (the server is a separate child of this process, counted apart).

The machine is shared: figures move with its load (printed with each section).
"""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

from pg_claimcheck.server.provision import provide_server

MAX_CONNECTIONS = 1_100
SCALE_JOBS, SCALE_BATCH, SCALE_WORK_MS = 40_000, 5, "20"
EFFICIENCY_JOBS = 20_000
STARTUP_JOBS = 10


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_check(dsn: str, args: list[str], scratch: Path) -> tuple[dict, float]:
    out = scratch / "run.json"
    before = _children_cpu()
    done = subprocess.run([sys.executable, "-m", "pg_claimcheck", "check", "skip-locked", *args, "--json", str(out),
                           "--dsn", dsn], capture_output=True, text=True)
    cpu = _children_cpu() - before
    if done.returncode not in (0, 1):
        raise SystemExit(f"check {' '.join(args)} failed (exit {done.returncode}): {done.stderr.strip()[-800:]}")
    (run,) = json.loads(out.read_text())["runs"]
    return run, cpu


def load() -> str:
    return "load average " + ", ".join(f"{x:.1f}" for x in os.getloadavg())


def claimers_per_box(dsn: str, scratch: Path, sizes: list[int]) -> None:
    print(f"== claimers per box: skip-locked, lease, batch {SCALE_BATCH}, work {SCALE_WORK_MS} ms, "
          f"{SCALE_JOBS:,} jobs, 2 Locust worker processes ({load()})")
    for users in sizes:
        run, cpu = run_check(dsn, ["--engine", "locust", "--processes", "2", "--users", str(users),
                                   "--jobs", str(SCALE_JOBS), "--batch", str(SCALE_BATCH),
                                   "--work-ms", SCALE_WORK_MS], scratch)
        per_user = run["claims_over_time"]["workers"]
        claimed = sum(1 for counts in per_user.values() if sum(counts) > 0)
        lat = run["claim_latency_ms"]
        print(f"users {users:>5}: connected {len(per_user):>5}, claimed {claimed:>5}, "
              f"{'exactly-once' if run['exactly_once'] else 'VIOLATED'}, {run['jobs_done']:,} done in "
              f"{run['elapsed_s']:.1f}s = {run['throughput_jobs_per_s']:,.0f} jobs/s, claim ms p50 {lat.get('p50')} "
              f"p99 {lat.get('p99')}, client CPU {cpu:.1f}s ({load()})", flush=True)


def efficiency(dsn: str, scratch: Path) -> None:
    """Each engine also runs STARTUP_JOBS jobs: its fixed CPU (interpreters, imports, seeding, the
    report), subtracted to give the CPU of the claim load itself ("steady")."""
    print(f"== jobs/s per client core: skip-locked, lease, batch 10, work 0, {EFFICIENCY_JOBS:,} jobs ({load()})")
    for claimers in (8, 16):
        for engine, args in (("fork", ["--workers", str(claimers)]),
                             ("locust", ["--engine", "locust", "--processes", "2", "--users", str(claimers)])):
            _, fixed = run_check(dsn, [*args, "--jobs", str(STARTUP_JOBS)], scratch)
            run, cpu = run_check(dsn, [*args, "--jobs", str(EFFICIENCY_JOBS)], scratch)
            steady = max(cpu - fixed, 1e-3)
            print(f"{claimers:>2} claimers, {engine:>6}: {run['throughput_jobs_per_s']:>7,.0f} jobs/s, client CPU "
                  f"{cpu:5.1f}s -> {run['jobs_done'] / cpu:>6,.0f} jobs per client CPU-second; minus its "
                  f"{STARTUP_JOBS}-job run's {fixed:.1f}s: {run['jobs_done'] / steady:>6,.0f} steady "
                  f"({'exactly-once' if run['exactly_once'] else 'VIOLATED'}; {load()})", flush=True)


def main(sizes: list[int]) -> None:
    with tempfile.TemporaryDirectory() as tmp, provide_server(pg="embedded", max_connections=MAX_CONNECTIONS) as server:
        print(f"PostgreSQL {server.version} ({server.source}), max_connections {MAX_CONNECTIONS}")
        efficiency(server.dsn, Path(tmp))
        if sizes:
            claimers_per_box(server.dsn, Path(tmp), sizes)


if __name__ == "__main__":
    # `locust_scale.py 0` runs only the efficiency part.
    main([int(x) for x in sys.argv[1:] if int(x) > 0] if sys.argv[1:] else [250, 500, 1000])
