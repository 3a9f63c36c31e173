"""Does `compare` flag real slowdowns and only those? Figures printed, never asserted
(run: .venv/bin/python tests/benchmarks/compare_guard.py [PAIRS [WORKERS WORK_MS]]).

1. False alarms: PAIRS comparisons of two reports of the same configuration, made back to back
   (`bench --repeat 5` each). Every regression reported here is a false alarm.
2. Detection: PAIRS comparisons of a baseline against the same configuration with `--work-ms`
   raised so that each job's cycle (claim + work + complete, per worker) takes about twice as long.
3. For contrast, the same reports cut to their first repetition (what `compare` judged before: one
   figure per side, the threshold alone).

Uses $CLAIMCHECK_DSN when set, else one embedded server for the whole benchmark. Wall-clock figures on
a shared 2-core machine are noisy: the load average is printed with them.
"""
from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from pg_claimcheck.server.provision import DSN_ENV, provide_server
from pg_claimcheck.verdict.stats import median

PAIRS = int(sys.argv[1]) if len(sys.argv) > 1 else 10
REPEAT = 5
WORKERS, JOBS, WORK_MS = (int(sys.argv[2]), 600, float(sys.argv[3])) if len(sys.argv) > 3 else (2, 600, 3.0)
"""Work (a sleep) dominates the cycle, as in most real queues; CPU contention from other processes on a
shared machine then moves throughput less than it does a claim-bound configuration."""
BENCH = ["--strategies", "skip-locked", "--mode", "lease", "--workers", str(WORKERS), "--jobs", str(JOBS),
         "--repeat", str(REPEAT)]


def claimcheck(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pg_claimcheck", *args], capture_output=True, text=True, timeout=600)


def bench(dsn: str, path: Path, work_ms: float) -> dict:
    done = claimcheck("bench", *BENCH, "--work-ms", f"{work_ms:g}", "--dsn", dsn, "--json", str(path))
    if done.returncode != 0:
        raise SystemExit(f"bench failed ({done.returncode}): {done.stderr[-800:]}")
    return json.loads(path.read_text())


def compare(base: Path, new: Path) -> int:
    done = claimcheck("compare", str(base), str(new))
    if done.returncode not in (0, 1):
        raise SystemExit(f"compare ended with {done.returncode}: {done.stderr[-500:]}")
    if "busier" in done.stderr:
        WARNED.add((base.name, new.name))
    return done.returncode


WARNED: set[tuple[str, str]] = set()
"""Comparisons where compare warned that the machine's load differed between the two reports."""


def first_repetition(doc: dict, path: Path) -> Path:
    """The report as if run once: its first repetition only."""
    doc = copy.deepcopy(doc)
    for run in doc["runs"]:
        first = run["repetitions"][0]
        run["repetitions"] = [first]
        run["throughput_jobs_per_s"] = first["throughput_jobs_per_s"]
        run["throughput"] = {"n": 1, "median": first["throughput_jobs_per_s"], "min": first["throughput_jobs_per_s"],
                             "max": first["throughput_jobs_per_s"], "mad": 0.0}
    path.write_text(json.dumps(doc))
    return path


def rates(doc: dict) -> list[float]:
    return [r["throughput_jobs_per_s"] for r in doc["runs"][0]["repetitions"]]


def main() -> None:
    scratch = Path(tempfile.mkdtemp(prefix="cc-guard-"))
    with provide_server(os.environ.get(DSN_ENV)) as server:
        print(f"PostgreSQL {server.version} ({server.source}); load average {os.getloadavg()[0]:.2f}; "
              f"skip-locked, lease, {WORKERS} workers, {JOBS} jobs, bench --repeat {REPEAT}, compare defaults "
              "(max drop 20 %, alpha 0.01)")
        probe = bench(server.dsn, scratch / "probe.json", WORK_MS)
        cycle_ms = WORKERS * 1000 / median(rates(probe))  # per job, per worker: claim + work + complete
        slow_ms = WORK_MS + cycle_ms  # adds one whole cycle: each job now takes about twice as long
        print(f"cycle per job at --work-ms {WORK_MS:g}: {cycle_ms:.2f} ms per worker; the slow configuration "
              f"uses --work-ms {slow_ms:.2f}")
        false_alarms = detected = single_false = single_detected = 0
        for i in range(PAIRS):
            a, b = scratch / f"a{i}.json", scratch / f"b{i}.json"
            s = scratch / f"s{i}.json"
            docs = {p: bench(server.dsn, p, ms) for p, ms in ((a, WORK_MS), (b, WORK_MS), (s, slow_ms))}
            same, slow = compare(a, b), compare(a, s)
            one = {p: first_repetition(d, p.with_name(p.stem + "-1.json")) for p, d in docs.items()}
            same1, slow1 = compare(one[a], one[b]), compare(one[a], one[s])
            false_alarms += same
            detected += slow
            single_false += same1
            single_detected += slow1
            ma, mb, ms_ = (median(rates(docs[p])) for p in (a, b, s))
            warned = "(load warning)" if (a.name, b.name) in WARNED else ""
            print(f"pair {i + 1:2d}: same config {ma:7,.0f} → {mb:7,.0f} jobs/s ({(mb / ma - 1) * 100:+6.1f} %) "
                  f"{'REGRESSION' if same else 'ok':10s}{warned} | slow {ms_:7,.0f} ({(ms_ / ma - 1) * 100:+6.1f} %) "
                  f"{'caught' if slow else 'MISSED':6s} | one repetition: {'REGRESSION' if same1 else 'ok':10s} "
                  f"{'caught' if slow1 else 'MISSED'}  (load {os.getloadavg()[0]:.2f})", flush=True)
        print(f"\nrepeat {REPEAT} + U test: false regressions {false_alarms} of {PAIRS}; slowdowns caught "
              f"{detected} of {PAIRS}; compare warned of different load in {len(WARNED)} comparison(s)")
        print(f"one repetition, threshold alone: false regressions {single_false} of {PAIRS}; slowdowns caught "
              f"{single_detected} of {PAIRS}")


if __name__ == "__main__":
    main()
