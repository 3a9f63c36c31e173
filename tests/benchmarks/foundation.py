"""Figures for the foundation, printed, never asserted (run: .venv/bin/python tests/benchmarks/foundation.py).

1. Wall time of `claimcheck check skip-locked` (16 workers x 20,000 jobs), embedded server start included.
2. Seeding time of 1,000,000 jobs (create, one INSERT ... SELECT, primary key, partial index, analyze).
3. Peak RSS of the coordinator process over a run that records 1,000,000 claims: bigint keys on
   claimcheck's jobs table, then uuid keys on a file's own table (the ledger maps them to dense
   numbers; the coordinator holds the seeded keys once).

`python tests/benchmarks/foundation.py rss` runs only (3); `rss uuid` only its uuid run.

Uses $CLAIMCHECK_DSN for (2) when set, else an embedded server.
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

from pg_claimcheck.server.provision import provide_server
from pg_claimcheck.server.schema import build_jobs_table
from pg_claimcheck.server.session import run_schema

CLAIM_AND_FINISH_100 = """\
-- name: claim
WITH next AS (
    SELECT id FROM jobs
    WHERE queue = 'default' AND status = 'queued' AND run_at <= now()
    ORDER BY run_at LIMIT %(batch)s
    FOR UPDATE SKIP LOCKED
)
UPDATE jobs j SET status = 'done', attempts = j.attempts + 1
FROM next WHERE j.id = next.id
RETURNING j.id, j.attempts;
"""


CLAIM_AND_FINISH_100_UUID = """\
-- name: schema
CREATE TABLE uuid_jobs (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), status text NOT NULL DEFAULT 'queued',
                        attempts int NOT NULL DEFAULT 0);
CREATE INDEX uuid_jobs_ready ON uuid_jobs (id) WHERE status = 'queued';
-- name: seed
INSERT INTO uuid_jobs SELECT FROM generate_series(1, %(jobs)s) RETURNING id;
-- name: remaining
SELECT count(*) FROM uuid_jobs WHERE status = 'queued';
-- name: claim
WITH next AS (
    SELECT id FROM uuid_jobs WHERE status = 'queued' LIMIT %(batch)s FOR UPDATE SKIP LOCKED
)
UPDATE uuid_jobs j SET status = 'done', attempts = j.attempts + 1
FROM next WHERE j.id = next.id
RETURNING j.id, j.attempts;
"""


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "pg_claimcheck", *args]


def check_wall_time() -> None:
    for attempt in range(3):
        started = time.perf_counter()
        done = subprocess.run(cli("check", "skip-locked"), capture_output=True, text=True)
        print(f"check skip-locked 16 x 20,000 (embedded, server start included): "
              f"{time.perf_counter() - started:.2f} s wall, exit {done.returncode}")


def seeding_time() -> None:
    with provide_server() as server, run_schema(server) as (conn, run):
        for _ in range(2):
            seeded = build_jobs_table(conn, run.schema, 1_000_000)
            print(f"seeding 1,000,000 jobs on PostgreSQL {server.version} ({server.source}): {seeded.seconds:.2f} s")


def coordinator_peak_rss(text: str = CLAIM_AND_FINISH_100, keys: str = "bigint") -> None:
    with tempfile.TemporaryDirectory() as tmp:
        claim = Path(tmp) / "claim_and_finish.sql"
        claim.write_text(text)
        proc = subprocess.Popen(cli("check", str(claim), "--jobs", "1000000", "--batch", "100", "--workers", "8",
                                    "--json", str(Path(tmp) / "r.json")),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        peak = 0
        coordinator = psutil.Process(proc.pid)

        def watch() -> None:
            nonlocal peak
            while proc.poll() is None:
                try:
                    peak = max(peak, coordinator.memory_info().rss)
                except psutil.Error:
                    return
                time.sleep(0.05)

        watcher = threading.Thread(target=watch)
        watcher.start()
        started = time.perf_counter()
        out, err = proc.communicate()
        watcher.join()
        claims = [line for line in out.splitlines() if "claim_and_finish" in line]
        print(f"1,000,000-claim run, {keys} keys: coordinator peak RSS {peak / 2**20:.0f} MiB, "
              f"{time.perf_counter() - started:.1f} s wall, exit {proc.returncode}")
        for line in claims[:1]:
            print("   ", " ".join(line.split()))


if __name__ == "__main__":
    if sys.argv[1:2] != ["rss"]:
        check_wall_time()
        seeding_time()
    if sys.argv[1:] != ["rss", "uuid"]:
        coordinator_peak_rss()
    coordinator_peak_rss(CLAIM_AND_FINISH_100_UUID, "uuid")
