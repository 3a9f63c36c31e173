"""The floor of a Python worker next to pgbench, printed, never asserted: what a worker costs with
nothing of ours.

Run: .venv/bin/python tests/benchmarks/python_floor.py [RUNS]   ($CLAIMCHECK_DSN, else an embedded server)

The same cells as tests/benchmarks/pgbench_parity.py (skip-locked, batch 10, zero work, 20,000
jobs; lease and lock mode; 1, 8 and 16 workers). In each cell, RUNS times: the floor, then pgbench
on the same statements (`claimcheck.pgbench`, as `bench --pgbench` runs it), each on a freshly
seeded table. A floor worker is a forked process running skip-locked's own claim and complete
statements through libpq's prepared statements (psycopg's `pgconn`), binding the claim's text
values straight back, with no ledger, no records sent to a coordinator, no fault hooks and no
progress: the least any Python worker with one process per connection does. Its clock starts when
every worker is connected and prepared, as pgbench's "without initial connection time" does.

Prints jobs/s, the floor / pgbench ratio and each side's CPU per job (user + system). Next to
`pgbench_parity.py`'s ratios it says how much of the gap to pgbench is our bookkeeping (the part
that makes the verdict) and how much is any Python worker of this design on this machine.
Works in a schema of its own (`claimcheck_floor<pid>`), dropped at the end.
"""
from __future__ import annotations

import multiprocessing
import os
import resource
import sys
import time

import psycopg

from claimcheck.dialect import to_positional
from claimcheck.pgbench import run_pgbench
from claimcheck.provision import provide_server
from claimcheck.runcontext import schema_name
from claimcheck.schema import build_jobs_table, create_schema, drop_schema
from claimcheck.settings import RunSettings, WorkTime
from claimcheck.strategy import load_strategy
from pgbench_parity import MODES, WORKERS, table  # this directory: run as a script, like it

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


def main(runs: int) -> None:
    run_id = f"floor{os.getpid()}"
    schema = schema_name(run_id)
    cells: dict[tuple[str, int], list[dict]] = {(m, w): [] for m in MODES for w in WORKERS}
    with provide_server() as server, psycopg.connect(server.dsn, autocommit=True) as conn:
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
                        pgbench = run_pgbench(conn, server.dsn, server.bin_dir, schema, run_id, STRATEGY, run)
                        figures = {"ratio": rate / pgbench.jobs_per_s, "floor_us": cpu,
                                   "pgbench_us": pgbench.cpu_s / pgbench.jobs_done * 1e6}
                        cells[(mode, workers)].append(figures)
                        print(f"run {i + 1} (load {os.getloadavg()[0]:.2f}): {mode:5} {workers:>2} workers: floor "
                              f"{rate:,.0f} jobs/s, pgbench {pgbench.jobs_per_s:,.0f} jobs/s, ratio {figures['ratio']:.2f}; "
                              f"CPU per job {cpu:.0f} us (pgbench {figures['pgbench_us']:.0f} us)", flush=True)
        finally:
            drop_schema(conn, schema)

    table(cells, runs, "floor / pgbench jobs/s", "ratio", "{:.2f}")
    table(cells, runs, "the floor workers' CPU per job, us", "floor_us", "{:.0f}")
    table(cells, runs, "pgbench's CPU per job, us", "pgbench_us", "{:.0f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
