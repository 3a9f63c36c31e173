"""What the rate tests no longer assert, printed: whether a producer kept up, how much was claimed while it
fed the queue, and how much sooner notify picks up than polling. A busy machine changes all three, so they
are figures to read beside the load, never a test's verdict (tests/integration/test_producer.py judges
what held).

Run: .venv/bin/python tests/benchmarks/rate_timings.py [RUNS] ($CLAIMCHECK_DSN, else an embedded server).
"""
from __future__ import annotations

import os
import sys

from pg_claimcheck.contract.strategy import load_strategy
from pg_claimcheck.engine.driver import run_strategy
from pg_claimcheck.server.provision import provide_server
from pg_claimcheck.server.session import run_schema
from pg_claimcheck.settings import RunSettings

CASES = {
    "1 producer, 200/s for 1.5 s, 3 workers": dict(workers=3, jobs=20, batch=5, rate_per_s=200, produce_s=1.5),
    "3 producers, 300/s for 1 s, 3 workers": dict(workers=3, jobs=10, batch=5, rate_per_s=300, produce_s=1.0,
                                                  producers=3),
    "notify, 50/s, 5 s poll pause": dict(workers=3, jobs=5, batch=5, poll_ms=5000, rate_per_s=50, produce_s=1.0,
                                         wakeup="notify"),
    "poll, 50/s, 5 s poll pause": dict(workers=3, jobs=5, batch=5, poll_ms=5000, rate_per_s=50, produce_s=1.0),
}


def main(runs: int) -> None:
    print(f"load average: {os.getloadavg()}")
    with provide_server(dsn=os.environ.get("CLAIMCHECK_DSN")) as server:
        for name, settings in CASES.items():
            for _ in range(runs):
                with run_schema(server) as (conn, run):
                    result = run_strategy(conn, server, run, load_strategy("skip-locked"), RunSettings(**settings))
                p = result.producer
                print(f"{name}: kept up {p.kept_up}, enqueued {p.enqueued}/{p.scheduled}, claimed before the last "
                      f"enqueue {p.claimed_before_last_enqueue}, achieved {p.achieved_rate_per_s:,.1f}/s, pickup ms "
                      f"p50 {p.pickup_latency_ms['p50']:,.1f} p99 {p.pickup_latency_ms['p99']:,.1f}, "
                      f"exactly-once {result.exactly_once}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
