"""Our latency at a rate beside pgbench --rate's, on the same SQL, printed, never asserted.

Run: .venv/bin/python tests/benchmarks/rate.py [RUNS] [--rates 50,100,200,400] [--duration 10] [--workers 4]
[--poll-ms MS] ($CLAIMCHECK_DSN, else an embedded server). For each rate, RUNS times (default 3): pgbench
and ours, each on a freshly seeded table of one job, on the same server, back to back (pgbench first in
the first, third, ... run, ours in the others).

What "the same" is. Both sides are a queue fed at R jobs/s and worked by W connections (default 4),
skip-locked's own statements, batch 1, zero work time, lease mode:

- **Ours**: `claimcheck check skip-locked --rate R --duration S --workers W --batch 1 --jobs 1 --work-ms 0`:
  one producer process enqueues job i at `start + i/R` (evenly spaced) with `enqueue_job`; W worker
  processes claim (polling every --poll-ms, 10 ms unless given, while the queue is empty) and complete. Pickup
  latency = the job's scheduled enqueue time to its claim's commit; end-to-end = to its completion's
  commit (docs/producers.md).
- **pgbench**: W clients on one thread, `--rate R`, ceil(R x S / W) scripts each; a script is one job:
  `enqueue_job` (its key from a per-client counter), the claim, the completion
  (`pg_claimcheck.engine.pgbench.rate_script`). pgbench schedules script starts in advance (Poisson arrivals
  of mean rate R) and a client that comes free takes the next start: a job waits for the first free
  client as ours waits for the first free worker. Its latency = the scheduled start to the end of the
  completion; its schedule lag = the scheduled start to the actual start (the enqueue's send).

So **end-to-end** is measured between the same two points on both sides (the scheduled arrival, the
completion's commit) and is the comparison: `ratio` = ours / pgbench's at p50, p95, p99. pgbench's lag
is not our pickup: our pickup also holds the enqueue's commit, the time until a polling worker looks,
and the claim's commit. The differences left in the method: pgbench's arrivals are Poisson, ours evenly
spaced (more bunching on pgbench's side: its tail grows earlier near the knee); in pgbench the job's
enqueue and claim are sent by the client that will work it, no polling (our worker finds a job only at
its next claim, up to --poll-ms later when it was idle); above the knee pgbench runs every script
however late (its lag grows through the run), while our producer sends late jobs until `--duration`
plus 1 s and counts the rest as not enqueued (`producer_kept_up` false), and its own lag is the
producer's, not the queue's. pgbench is the embedded server's (`pg_claimcheck.engine.pgbench`); its
latencies are read from its per-transaction log (--log) into HDR histograms made as ours are.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg
from pgbench_parity import run_bench  # this directory: run as a script, like it

from pg_claimcheck.contract.strategy import load_strategy
from pg_claimcheck.engine.feedfigures import _histogram, _record, _summary
from pg_claimcheck.engine.pgbench import run_pgbench_at_rate
from pg_claimcheck.server.provision import provide_server
from pg_claimcheck.server.runcontext import RunContext, schema_name
from pg_claimcheck.server.schema import build_jobs_table, create_schema, drop_schema
from pg_claimcheck.settings import RunSettings, WorkTime

STRATEGY = "skip-locked"
SEEDED_JOBS = 1  # the least backlog `check --rate` takes: latency then measures the rate, not a backlog
PERCENTILES = ("p50", "p95", "p99", "max")


def ours(dsn: str, rate: float, duration_s: float, workers: int, poll: list[str], scratch: Path) -> dict:
    """Our figures at the rate: `check --rate`, from its JSON report."""
    run, = run_bench(scratch, ["check", STRATEGY, "--rate", f"{rate:g}", "--duration", f"{duration_s:g}",
                               "--workers", str(workers), "--batch", "1", "--jobs", str(SEEDED_JOBS),
                               "--work-ms", "0", *poll, "--dsn", dsn])
    return {"achieved": run["achieved_rate_per_s"], "max_lag_ms": run["producer_max_lag_ms"],
            "first": run["pickup_latency_ms"], "e2e": run["end_to_end_latency_ms"],
            "note": "" if run["producer_kept_up"] else
            f"behind: {run['scheduled_jobs'] - run['enqueued_jobs']:,} not enqueued"}


def pgbench(conn: psycopg.Connection, server, run: RunContext, rate: float, duration_s: float,
            workers: int) -> dict:
    """pgbench's figures at the rate, on a table seeded as ours is."""
    settings = RunSettings(workers=workers, jobs=SEEDED_JOBS, batch=1, mode="lease", work=WorkTime("fixed", 0.0))
    build_jobs_table(conn, run.schema, SEEDED_JOBS)
    counts, done = run_pgbench_at_rate(conn, run, server.bin_dir, load_strategy(STRATEGY), settings, rate, duration_s)
    latency, lag = _histogram(), _histogram()
    for total_us, lag_us in counts.logged:
        _record(latency, total_us / 1e6)
        _record(lag, lag_us / 1e6)
    lags = _summary(lag)
    missing = counts.scripts - done  # a claim that found every queued row locked (SKIP LOCKED) took none
    return {"achieved": counts.tps, "max_lag_ms": lags["max"], "first": lags, "e2e": _summary(latency),
            "note": f"{counts.failed} failed" if counts.failed else (f"{missing} not done" if missing > 0 else "")}


def line(side: str, f: dict) -> str:
    first = "pickup" if side == "ours" else "lag"
    return (f"{side:7} {f['achieved']:8,.1f}/s, lag max {f['max_lag_ms']:8,.1f} ms; {first} "
            + " ".join(f"{p} {f['first'][p]:.2f}" for p in PERCENTILES) + "; end-to-end "
            + " ".join(f"{p} {f['e2e'][p]:.2f}" for p in PERCENTILES) + f" ms {f['note']}")


def mid(values: list[float]) -> str:
    return f"{statistics.median(values):,.2f} ({min(values):,.2f}-{max(values):,.2f})"


def tables(cells: dict[float, list[tuple[dict, dict]]], runs: int) -> None:
    print(f"\nmedian (min-max) over {runs} runs, ms; ours' first latency is pickup, pgbench's its schedule lag")
    print("| rate/s | side | achieved/s | pickup or lag p50 | p99 | end-to-end p50 | p95 | p99 | max |")
    print("|---|---|---|---|---|---|---|---|---|")
    for rate, pairs in cells.items():
        for index, side in enumerate(("pgbench", "ours")):
            fs = [pair[index] for pair in pairs]
            print(f"| {rate:g} | {side} | {mid([f['achieved'] for f in fs])} | {mid([f['first']['p50'] for f in fs])} "
                  f"| {mid([f['first']['p99'] for f in fs])} | "
                  + " | ".join(mid([f["e2e"][p] for f in fs]) for p in PERCENTILES) + " |")
    print("\nend-to-end, ours / pgbench's (the same run's pair): median (min-max)")
    print("| rate/s | p50 | p95 | p99 |")
    print("|---|---|---|---|")
    for rate, pairs in cells.items():
        print(f"| {rate:g} | " + " | ".join(mid([o["e2e"][p] / b["e2e"][p] for b, o in pairs])
                                             for p in ("p50", "p95", "p99")) + " |")


def main(runs: int, rates: list[float], duration_s: float, workers: int, poll_ms: float | None) -> None:
    run_id = f"rate{os.getpid()}"
    schema = schema_name(run_id)
    cells: dict[float, list[tuple[dict, dict]]] = {rate: [] for rate in rates}
    poll = [] if poll_ms is None else ["--poll-ms", f"{poll_ms:g}"]
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(), flush=True)
    with provide_server() as server, psycopg.connect(server.dsn, autocommit=True) as conn, \
            tempfile.TemporaryDirectory() as scratch:
        print(f"server: {server.version} ({server.source}); {STRATEGY}, {workers} workers, batch 1, "
              f"{duration_s:g} s per rate, our --poll-ms {'default' if poll_ms is None else f'{poll_ms:g}'}",
              flush=True)
        create_schema(conn, schema)
        conn.execute(f"SET search_path TO {schema}")
        try:
            for i in range(runs):
                for rate in rates:
                    # Each side goes first in every other run: the machine's load drifts, and the second
                    # would always meet the first one's leftovers (dead tuples, a busy checkpointer).
                    if i % 2:
                        mine = ours(server.dsn, rate, duration_s, workers, poll, Path(scratch))
                    theirs = pgbench(conn, server, RunContext(server.dsn, run_id), rate, duration_s, workers)
                    if not i % 2:
                        mine = ours(server.dsn, rate, duration_s, workers, poll, Path(scratch))
                    cells[rate].append((theirs, mine))
                    print(f"run {i + 1}, rate {rate:g}/s (load {os.getloadavg()[0]:.2f}):\n  {line('pgbench', theirs)}"
                          f"\n  {line('ours', mine)}", flush=True)
        finally:
            drop_schema(conn, schema)
    tables(cells, runs)
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


def _rates(text: str) -> list[float]:
    try:
        rates = [float(r) for r in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: jobs/s, comma-separated numbers (50,100,200)") from None
    if not all(0 < r < float("inf") for r in rates):
        raise argparse.ArgumentTypeError(f"{text!r}: each rate must be above 0 jobs/s")
    return rates


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="?", type=int, default=3)
    p.add_argument("--rates", type=_rates, default=_rates("50,100,200,400"), help="jobs/s, comma-separated")
    p.add_argument("--duration", type=float, default=10.0, help="seconds of arrivals per rate")
    p.add_argument("--workers", type=int, default=4, help="our workers, pgbench's clients")
    p.add_argument("--poll-ms", type=float, help="our workers' pause after an empty claim (default: check's)")
    return p.parse_args(argv)


if __name__ == "__main__":
    args = parse(sys.argv[1:])
    main(args.runs, args.rates, args.duration, args.workers, args.poll_ms)
