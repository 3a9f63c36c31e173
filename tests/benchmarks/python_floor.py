"""The floor of a Python worker next to pgbench, printed, never asserted: what a worker costs with
nothing of ours.

Run: .venv/bin/python tests/benchmarks/python_floor.py [RUNS]   ($CLAIMCHECK_DSN, else an embedded server)

The same cells as tests/benchmarks/pgbench_parity.py (skip-locked, batch 10, zero work, 20,000
jobs; lease and lock mode; 1, 8 and 16 workers). In each cell, RUNS times: the floor, then pgbench
on the same statements (`pg_claimcheck.engine.pgbench`, as `bench --pgbench` runs it), then our own workers
(`claimcheck bench` for the cell, on the same server), each on a freshly seeded table: the three
meet the machine in the same state, within a minute, which separate sweeps cannot promise.

A floor worker is a forked process running skip-locked's own claim and complete statements
through libpq's prepared statements (psycopg's `pgconn`), binding the claim's text values back,
with no ledger, no records sent to a coordinator, no fault hooks and no progress: the least any
Python worker with one process per connection does. Its clock starts when
every worker is connected and prepared, as pgbench's "without initial connection time" does.

Prints jobs/s, the floor's and our ratio to the round's pgbench, our jobs/s over the floor's, and
each one's CPU per job (user + system). It says how much of the gap to pgbench is our bookkeeping
(the part that makes the verdict) and how much is any Python worker of this design on this
machine. Two differences of method, each a few percent at most: the floor's span ends when its
last worker found the queue empty and left, ours at the last job (in our favour); the floor's CPU
counts each worker from fork to exit, its connection included, ours from the release to the end
(in our favour too).

Works in a schema of its own (`claimcheck_floor<pid>`), dropped at the end.
"""
from __future__ import annotations

import multiprocessing
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import psycopg
from pgbench_parity import (  # this directory: run as a script, like it
    MODES,
    WORKERS,
    bench_args,
    run_bench,
    table,
    workers_us,
)

from pg_claimcheck.contract.dialect import to_positional
from pg_claimcheck.contract.strategy import load_strategy
from pg_claimcheck.engine.pgbench import run_pgbench
from pg_claimcheck.server.provision import provide_server
from pg_claimcheck.server.runcontext import RunContext, schema_name
from pg_claimcheck.server.schema import build_jobs_table, create_schema, drop_schema
from pg_claimcheck.settings import RunSettings, WorkTime

JOBS, BATCH = 20_000, 10  # the parity benchmark's cells (its MODES and WORKERS)
STRATEGY = load_strategy("skip-locked")


def settings(mode: str, workers: int) -> RunSettings:
    return RunSettings(workers=workers, jobs=JOBS, batch=BATCH, mode=mode, work=WorkTime("fixed", 0.0))


def worker(dsn: str, schema: str, run: RunSettings, barrier) -> None:
    """Claim and complete until the queue is empty, then leave (in a forked child)."""
    claim, claim_params = to_positional(STRATEGY.statements["claim"])
    complete, complete_params = to_positional(STRATEGY.statements["complete"])
    conn = psycopg.connect(dsn, autocommit=True, options=f"-c search_path={schema}")
    pg = conn.pgconn
    pg.prepare(b"claim", claim.encode(), None)
    pg.prepare(b"complete", complete.encode(), None)
    fixed = {"batch": str(run.batch).encode(), "lease_seconds": str(run.lease_seconds).encode(), "worker": b"floor"}
    bound = [fixed[p] for p in claim_params]
    barrier.wait()
    while True:
        if run.mode == "lock":
            pg.exec_(b"BEGIN")
        result = pg.exec_prepared(b"claim", bound)
        rows = [(result.get_value(i, 0), result.get_value(i, 1)) for i in range(result.ntuples)]
        for job, attempt in rows:
            values = {"id": job, "attempts": attempt, **fixed}
            pg.exec_prepared(b"complete", [values[p] for p in complete_params])
        if run.mode == "lock":
            pg.exec_(b"COMMIT")
        if not rows:
            os._exit(0)


def floor_cell(dsn: str, schema: str, run: RunSettings) -> tuple[float, float]:
    """(jobs/s, CPU us per job) of `run.workers` forked floor workers on the table as seeded now."""
    barrier = multiprocessing.get_context("fork").Barrier(run.workers + 1)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    children = []
    for _ in range(run.workers):
        pid = os.fork()
        if pid == 0:
            try:
                worker(dsn, schema, run, barrier)
            finally:
                os._exit(1)
        children.append(pid)
    barrier.wait()
    started = time.perf_counter()
    for pid in children:
        _, status = os.waitpid(pid, 0)
        if status != 0:
            raise SystemExit(f"a floor worker failed (wait status {status})")
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return JOBS / seconds, cpu / JOBS * 1e6


def ours_cell(dsn: str, run: RunSettings, scratch: Path) -> tuple[float, float]:
    """(jobs/s, CPU us per job) of our own workers in the cell: `claimcheck bench`, on the same server."""
    ours, = run_bench(scratch, [*bench_args((run.mode,), (run.workers,), pgbench=False), "--dsn", dsn])
    return ours["throughput_jobs_per_s"], workers_us(ours)


def main(runs: int) -> None:
    run_id = f"floor{os.getpid()}"
    schema = schema_name(run_id)
    cells: dict[tuple[str, int], list[dict]] = {(m, w): [] for m in MODES for w in WORKERS}
    with provide_server() as server, psycopg.connect(server.dsn, autocommit=True) as conn, \
            tempfile.TemporaryDirectory() as scratch:
        print(f"server: {server.version} ({server.source})", flush=True)
        create_schema(conn, schema)
        conn.execute(f"SET search_path TO {schema}")
        try:
            for i in range(runs):
                for mode in MODES:
                    for workers in WORKERS:
                        run = settings(mode, workers)
                        build_jobs_table(conn, schema, JOBS)
                        rate, cpu = floor_cell(server.dsn, schema, run)
                        build_jobs_table(conn, schema, JOBS)
                        pgbench = run_pgbench(conn, RunContext(server.dsn, run_id), server.bin_dir, STRATEGY, run)
                        ours, ours_cpu = ours_cell(server.dsn, run, Path(scratch))
                        figures = {"ratio": rate / pgbench.jobs_per_s, "ours_ratio": ours / pgbench.jobs_per_s,
                                   "ours_over_floor": ours / rate, "floor_us": cpu, "ours_us": ours_cpu,
                                   "pgbench_us": pgbench.cpu_s / pgbench.jobs_done * 1e6}
                        cells[(mode, workers)].append(figures)
                        print(f"run {i + 1} (load {os.getloadavg()[0]:.2f}): {mode:5} {workers:>2} workers: floor "
                              f"{rate:,.0f} jobs/s, pgbench {pgbench.jobs_per_s:,.0f} jobs/s, ours {ours:,.0f} jobs/s; "
                              f"ratio floor {figures['ratio']:.2f}, ours {figures['ours_ratio']:.2f}; "
                              f"CPU per job: floor {cpu:.0f} us, ours {ours_cpu:.0f} us, "
                              f"pgbench {figures['pgbench_us']:.0f} us", flush=True)
        finally:
            drop_schema(conn, schema)

    table(cells, runs, "floor / pgbench jobs/s", "ratio", "{:.2f}")
    table(cells, runs, "ours / pgbench jobs/s (the same pgbench run)", "ours_ratio", "{:.2f}")
    table(cells, runs, "ours / floor jobs/s", "ours_over_floor", "{:.2f}")
    table(cells, runs, "the floor workers' CPU per job, us", "floor_us", "{:.0f}")
    table(cells, runs, "our workers' CPU per job, us", "ours_us", "{:.0f}")
    table(cells, runs, "pgbench's CPU per job, us", "pgbench_us", "{:.0f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
