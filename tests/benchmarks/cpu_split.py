"""Where the machine's CPU goes in a pgbench parity cell, printed, never asserted.

Run: .venv/bin/python tests/benchmarks/cpu_split.py [RUNS] [MODE] [WORKERS]  (default 3 lease 16)

`pgbench_parity.py` shows the ratio; this shows why it is what it is. It runs the parity cell
(`claimcheck bench --pgbench`, skip-locked, zero work time, 20,000 jobs, batch 10) under
`perf record -a` (CPU-clock samples of every process on the machine), then splits the samples of
our run and of pgbench's run, each over its own span, by who used the CPU: the server's backends,
the clients (our worker processes, or the pgbench process), our coordinator, the idle loop, and
everything else. Per job, in microseconds of CPU, next to each other: when the machine is saturated
(little idle), the server's cost per job is the same in both runs, and the ratio is set by what
the clients cost per job. Needs `perf` and permission to sample the whole machine (root, or
kernel.perf_event_paranoid <= 0). Uses $CLAIMCHECK_DSN when set, else the embedded server.
"""
from __future__ import annotations

import json
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from pgbench_parity import bench_args  # this directory: run as a script, like it

FREQUENCY_HZ = 249
"""Samples per second per CPU: enough for shares over a 2-3 s run; sampling faster inflates the cost
of the processes that switch most (perf's own interrupts land on every switch)."""
KINDS = ("server backends", "clients", "coordinator", "idle", "other")
_FORK = re.compile(r"PERF_RECORD_FORK\((?P<child>\d+):\d+\):\((?P<parent>\d+):\d+\)")
_SAMPLE = re.compile(r"^\s*(?P<comm>.+?)\s+(?P<pid>-?\d+)/-?\d+\s+(?P<time>[\d.]+):\s*$")


def record(scratch: Path, mode: str, workers: int) -> tuple[dict, int, list[tuple[float, str, int]], dict[int, int]]:
    """One parity cell under `perf record -a`: its JSON run, the coordinator's pid, the samples
    (time, comm, pid) and each forked process's parent."""
    data, report = scratch / "perf.data", scratch / "cell.json"
    perf = subprocess.Popen(["perf", "record", "-a", "-F", str(FREQUENCY_HZ), "-o", str(data)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)  # perf is sampling before the coordinator starts
    try:
        bench = subprocess.Popen([sys.executable, "-m", "pg_claimcheck", *bench_args((mode,), (workers,)),
                                  "--json", str(report)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        _, errors = bench.communicate()
    finally:
        perf.send_signal(signal.SIGINT)
        perf.wait(60)
    if bench.returncode != 0:
        raise SystemExit(f"bench failed (exit {bench.returncode}): {errors.strip()[-500:]}")
    script = subprocess.run(["perf", "script", "-i", str(data), "--show-task-events", "-F", "comm,pid,tid,time"],
                            capture_output=True, text=True, check=True).stdout
    samples, parents = [], {}
    for line in script.splitlines():
        if fork := _FORK.search(line):
            parents.setdefault(int(fork["child"]), int(fork["parent"]))
        elif "PERF_RECORD" not in line and (sample := _SAMPLE.match(line)):
            samples.append((float(sample["time"]), sample["comm"].strip(), int(sample["pid"])))
    return json.loads(report.read_text())["runs"][0], bench.pid, samples, parents


def split(run: dict, coordinator: int, samples: list, parents: dict[int, int]) -> dict[str, dict[str, float]]:
    """CPU microseconds per job by kind, over our run's span and over pgbench's."""
    comms: dict[int, set[str]] = {}
    for _, comm, pid in samples:
        comms.setdefault(pid, set()).add(comm)
    pgbench = {pid for pid, names in comms.items() if "pgbench" in names}
    # The workers: forked by the coordinator and never anything else (the embedded server and
    # pgbench are its children too, under their own names once they exec;
    # and so is multiprocessing's resource tracker, under the coordinator's name, but it is nearly
    # always asleep: a worker is busy for the whole run).
    forked = [pid for pid, parent in parents.items()
              if parent == coordinator and pid != coordinator and comms.get(pid) == comms[coordinator]]
    busy = Counter(pid for _, _, pid in samples if pid in forked)
    typical = statistics.median(busy.values())
    ours = {pid for pid in forked if busy[pid] >= typical / 5}
    if len(ours) != run["workers"]:
        raise SystemExit(f"perf's samples show {len(ours)} busy worker processes, not {run['workers']}")
    spans = {"ours": [t for t, _, pid in samples if pid in ours], "pgbench": [t for t, _, pid in samples if pid in pgbench]}
    jobs = {"ours": run["jobs_done"], "pgbench": run["pgbench"]["jobs_done"]}
    out = {}
    for phase, times in spans.items():
        start, end = min(times), max(times)
        kinds = Counter()
        for t, comm, pid in samples:
            if start <= t <= end:
                kinds["server backends" if comm == "postgres" else "idle" if pid == 0 else
                      "clients" if pid in ours or pid in pgbench else "coordinator" if pid == coordinator else
                      "other"] += 1
        out[phase] = {kind: kinds[kind] / FREQUENCY_HZ / jobs[phase] * 1e6 for kind in KINDS}
        out[phase]["span_s"] = end - start
    return out


def main(runs: int, mode: str, workers: int) -> None:
    if shutil.which("perf") is None:
        raise SystemExit("cpu_split needs perf (linux-tools / linux-perf) on PATH")
    figures: dict[str, dict[str, list[float]]] = {p: {k: [] for k in (*KINDS, "span_s")} for p in ("ours", "pgbench")}
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(runs):
            run, coordinator, samples, parents = record(Path(tmp), mode, workers)
            if not any(pid == coordinator for _, _, pid in samples):
                raise SystemExit("perf recorded none of our samples: sampling the whole machine needs root or "
                                 "kernel.perf_event_paranoid <= 0")
            cell = split(run, coordinator, samples, parents)
            ratios.append(run["pgbench_ratio"])
            for phase, kinds in cell.items():
                for kind, value in kinds.items():
                    figures[phase][kind].append(value)
            rusage = (run["cpu_s"]["workers"] / run["jobs_done"] * 1e6, run["pgbench"]["cpu_s"] / run["pgbench"]["jobs_done"] * 1e6)
            print(f"run {i + 1}: {mode} {workers} workers, ratio {run['pgbench_ratio']:.2f}; clients' CPU per job by "
                  f"their own rusage {rusage[0]:.0f} us (pgbench {rusage[1]:.0f}); by perf's samples, us: " + "; ".join(
                f"{phase} " + ", ".join(f"{k} {cell[phase][k]:.0f}" for k in KINDS) for phase in cell), flush=True)
    print(f"\n{mode}, {workers} workers: ratio median {statistics.median(ratios):.2f} "
          f"({min(ratios):.2f}-{max(ratios):.2f}) over {runs} runs. CPU per job (us, both cores' samples over "
          "each run's own span), median (min-max):")
    print("| | " + " | ".join(KINDS) + " | total |\n|---|" + "---|" * (len(KINDS) + 1))
    for phase, name in (("ours", "claimcheck"), ("pgbench", "pgbench")):
        totals = [sum(figures[phase][k][i] for k in KINDS if k != "idle") for i in range(runs)]
        cells = [*(figures[phase][k] for k in KINDS), totals]
        print(f"| {name} | " + " | ".join(
            f"{statistics.median(v):.0f} ({min(v):.0f}-{max(v):.0f})" for v in cells) + " |")
    print("(total: all but idle)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3, sys.argv[2] if len(sys.argv) > 2 else "lease",
         int(sys.argv[3]) if len(sys.argv) > 3 else 16)
