"""Each fault kind alone against each library's own workers, printed, never asserted (run:
.venv/bin/python tests/benchmarks/lib_fault_kinds.py [--libs a,b] [--jobs N] [--workers N]).

`claimcheck lib NAME --faults` injects every kind in one run, so one broken promise hides which
fault broke it. This runs one library x one kind at a time (2 kills, 2 terminates, 2 stalls, or
1 restart of a server it starts itself: the embedded one, so the restart can land) and prints the
verdict, the double executions, the redeliveries and the jobs left unfinished, per cell.
"""
from __future__ import annotations

import argparse
import dataclasses

from pg_claimcheck.libs import ADAPTERS, load_adapter
from pg_claimcheck.libs.runner import lib_settings, run_library
from pg_claimcheck.libs.scoreboard import FAULT_KINDS as KINDS
from pg_claimcheck.server.provision import provide_server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--libs", default=",".join(ADAPTERS))
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()
    with provide_server(pg="embedded") as server:
        print(f"PostgreSQL {server.version} ({server.source}); {args.workers} workers, {args.jobs} jobs per run")
        for name in args.libs.split(","):
            adapter = load_adapter(name)
            for kind, plan in KINDS.items():
                settings = dataclasses.replace(lib_settings(args.workers, args.jobs, faults=True), faults=plan)
                result = run_library(server, adapter, settings)
                v = result.verdict
                landed = sorted(f.kind for f in result.faults)
                print(f"{name} {adapter.version()} {kind:9s}: "
                      f"{'exactly-once' if result.exactly_once else 'VIOLATED'}; injected {landed or 'none'}; "
                      f"double {v.double_claimed_jobs}, redeliveries {v.redeliveries}, "
                      f"unfinished {result.unfinished_jobs}, kinds {sorted({x.kind for x in v.violations})}",
                      flush=True)


if __name__ == "__main__":
    main()
