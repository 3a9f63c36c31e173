"""The floor of a Python worker, printed, never asserted: what a worker costs with nothing of ours.

Run: CLAIMCHECK_DSN=... .venv/bin/python tests/benchmarks/python_floor.py [RUNS]

The same cells as tests/benchmarks/pgbench_parity.py (skip-locked, batch 10, zero work, 20,000
jobs; lease and lock mode; 1, 8 and 16 workers), each worker a forked process running skip-locked's
own claim and complete statements through libpq's prepared statements (psycopg's `pgconn`), with
no ledger, no records sent to a coordinator, no fault hooks and no progress: the least any Python
worker does. Prints jobs/s and the workers' CPU per job (user + system, and user alone); next to
`bench --pgbench`'s "client CPU per job" it says how much of our workers' cost is the bookkeeping
that makes the verdict, and how much is Python and one process per worker.
Needs $CLAIMCHECK_DSN; works in a schema of its own (`claimcheck_floor_<pid>`), dropped at the end.
"""
from __future__ import annotations

import os
import resource
import statistics
import sys
import time

import psycopg

from claimcheck.dialect import to_positional
from claimcheck.schema import build_jobs_table, create_schema, drop_schema
from claimcheck.strategy import load_strategy

JOBS, BATCH, LEASE_S = 20_000, 10, 30
MODES, WORKERS = ("lease", "lock"), (1, 8, 16)


def statements() -> tuple[bytes, tuple[str, ...], bytes, tuple[str, ...]]:
    strategy = load_strategy("skip-locked")
    claim, claim_params = to_positional(strategy.statements["claim"])
    complete, complete_params = to_positional(strategy.statements["complete"])
    return claim.encode(), claim_params, complete.encode(), complete_params


def worker(dsn: str, schema: str, mode: str) -> None:
    """Claim and complete until the queue is empty, then leave (in a forked child)."""
    claim, claim_params, complete, complete_params = statements()
    conn = psycopg.connect(dsn, autocommit=True, options=f"-c search_path={schema}")
    pg = conn.pgconn
    pg.prepare(b"claim", claim, None)
    pg.prepare(b"complete", complete, None)
    fixed = {"batch": str(BATCH).encode(), "lease_seconds": str(LEASE_S).encode(), "worker": b"floor"}
    bound = [fixed[p] for p in claim_params]
    while True:
        if mode == "lock":
            pg.exec_(b"BEGIN")
        result = pg.exec_prepared(b"claim", bound)
        rows = [(result.get_value(i, 0), result.get_value(i, 1)) for i in range(result.ntuples)]
        for job, attempt in rows:
            values = {"id": job, "attempts": attempt, **fixed}
            pg.exec_prepared(b"complete", [values[p] for p in complete_params])
        if mode == "lock":
            pg.exec_(b"COMMIT")
        if not rows:
            os._exit(0)


def one_cell(dsn: str, schema: str, mode: str, workers: int) -> tuple[float, float, float]:
    """(jobs/s, CPU us per job, user CPU us per job) of `workers` forked floor workers."""
    with psycopg.connect(dsn, autocommit=True, options=f"-c search_path={schema}") as conn:
        build_jobs_table(conn, schema, JOBS)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    children = []
    for _ in range(workers):
        pid = os.fork()
        if pid == 0:
            try:
                worker(dsn, schema, mode)
            finally:
                os._exit(1)
        children.append(pid)
    for pid in children:
        os.waitpid(pid, 0)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    user = after.ru_utime - before.ru_utime
    return JOBS / seconds, (user + after.ru_stime - before.ru_stime) / JOBS * 1e6, user / JOBS * 1e6


def main(runs: int) -> None:
    dsn = os.environ.get("CLAIMCHECK_DSN")
    if not dsn:
        raise SystemExit("set CLAIMCHECK_DSN (a server and a role that may create a schema)")
    schema = f"claimcheck_floor_{os.getpid()}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        create_schema(conn, schema)
    cells: dict[tuple[str, int], list[tuple[float, float, float]]] = {}
    try:
        for i in range(runs):
            for mode in MODES:
                for workers in WORKERS:
                    rate, cpu, user = one_cell(dsn, schema, mode, workers)
                    cells.setdefault((mode, workers), []).append((rate, cpu, user))
                    print(f"run {i + 1} (load {os.getloadavg()[0]:.2f}): {mode:5} {workers:>2} workers: {rate:,.0f} "
                          f"jobs/s (connections included), CPU per job {cpu:.0f} us (user {user:.0f} us)", flush=True)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            drop_schema(conn, schema)
    print(f"\nfloor workers over {runs} runs, median: jobs/s; CPU per job us (user us)")
    print("| mode | " + " | ".join(f"{w} worker{'s' * (w > 1)}" for w in WORKERS) + " |")
    print("|---|" + "---|" * len(WORKERS))
    for mode in MODES:
        medians = [[statistics.median(x[k] for x in cells[(mode, w)]) for k in range(3)] for w in WORKERS]
        print(f"| {mode} | " + " | ".join(f"{r:,.0f}; {c:.0f} ({u:.0f})" for r, c, u in medians) + " |")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
