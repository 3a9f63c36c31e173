"""What a pooler costs skip-locked, and which part of that is claimcheck's own: jobs/s at 8 and 16
workers, lease and lock mode, in four set-ups run one after the other, round after round:

- direct: the workers' usual connections (libpq fast path, named prepared statements);
- stateless: the same server, directly, but the workers connect as they do through a pooler
  (pg_claimcheck.server.runcontext.StatelessConnection: a search path and isolation per transaction,
  nothing prepared by name): claimcheck's own part of the cost;
- pgbouncer: `--pooler pgbouncer` (transaction mode, its default pool: half the workers);
- pgbouncer, pool = workers: as many server connections as workers (the pooler's hop, no waiting);
- pgbouncer statement: `--pooler pgbouncer:statement`, its default pool, lease mode only (lock mode
  is refused there: docs/poolers.md, Statement mode).

    .venv/bin/python tests/benchmarks/pooler_cost.py [--dsn DSN] [--rounds 2] [--jobs 5000]
"""
from __future__ import annotations

import argparse
import dataclasses
import statistics
from contextlib import contextmanager

from rich.console import Console

from pg_claimcheck.app.runs import run_all
from pg_claimcheck.contract.strategy import load_strategy
from pg_claimcheck.server.pgbouncer import PoolerSpec
from pg_claimcheck.server.provision import provide_server
from pg_claimcheck.server.pooling import Pooler
from pg_claimcheck.server.topology import Topology
from pg_claimcheck.settings import RunSettings

WORKERS = (8, 16)
MODES = ("lease", "lock")
SETUPS = ("direct", "stateless", "pgbouncer", "pgbouncer, pool = workers", "pgbouncer statement")


@contextmanager
def setup(name: str, dsn: str | None, workers: int):
    if name.startswith("pgbouncer"):
        size = workers if "pool" in name else None
        mode = "statement" if name.endswith("statement") else "transaction"
        with provide_server(dsn=dsn, pooler=PoolerSpec(mode, size), workers=workers) as server:
            yield server
        return
    with provide_server(dsn=dsn) as server:
        if name == "stateless":  # every connection as through a pooler, none in between
            server = dataclasses.replace(server, topology=Topology(found=Pooler("transaction", False, "none in between")))
        yield server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dsn")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=5000)
    args = parser.parse_args()
    strategy, quiet = load_strategy("skip-locked"), Console(stderr=True, quiet=True)
    rates: dict[tuple, list[float]] = {}
    for _ in range(args.rounds):
        for workers in WORKERS:
            for name in SETUPS:
                with setup(name, args.dsn, workers) as server:
                    grid = [RunSettings(workers=workers, jobs=args.jobs, mode=mode) for mode in MODES
                            if mode == "lease" or server.topology.opens_blocks(worker=True)]
                    for result in run_all(server, [strategy], grid, quiet):
                        assert result.exactly_once
                        rates.setdefault((name, workers, result.settings.mode), []).append(
                            result.throughput_jobs_per_s)
    print("| set-up | workers | lease jobs/s | lock jobs/s |\n|---|---|---|---|")
    for workers in WORKERS:
        for name in SETUPS:
            cells = [" / ".join(f"{r:,.0f}" for r in rates[(name, workers, mode)])
                     + f" (median {statistics.median(rates[(name, workers, mode)]):,.0f})"
                     if (name, workers, mode) in rates else "refused" for mode in MODES]
            print(f"| {name} | {workers} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
