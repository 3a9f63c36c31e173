"""What the probes share: their connections, the claim/complete loop, and statistics reads.

Probes run a queue's real statements (a strategy's `claim` and `complete`, skip-locked by
default) on connections of their own, named `claimcheck/<run id>/<role>` in pg_stat_activity.
"""
from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import dataclass

import psycopg

from pg_claimcheck.contract.strategy import Strategy, sample_params
from pg_claimcheck.probes import PROBE_QUERIES
from pg_claimcheck.server.runcontext import RunContext, StatelessConnection
from pg_claimcheck.server.schema import schema_name

PROBE_STRATEGY = "skip-locked"
CLAIM_BATCH = 10  # jobs per claim, as in seed 003's claim
LEASE_SECONDS = 300.0
FORCE_FLUSH_MIN_VERSION = 150000  # pg_stat_force_next_flush() is new in PostgreSQL 15
STATS_POLL_S = 0.2
STATS_SETTLE_TIMEOUT_S = 3.0  # before 15: wait this long at most for n_dead_tup to stop moving


def connect(run: RunContext, role: str, stack: ExitStack, *, worker: bool = False) -> psycopg.Connection:
    """An autocommit connection in the run's schema, closed when `stack` closes (also on error). A
    `worker` (a queue's client: its workers, producers and listeners) goes through --pooler's PgBouncer."""
    return stack.enter_context(run.connect(role, worker=worker))


@dataclass(frozen=True)
class Claimed:
    id: int
    attempts: int | None


def claim(conn: psycopg.Connection, strategy: Strategy, worker: str, batch: int = CLAIM_BATCH) -> list[Claimed]:
    """One claim, committed: the lease style of seed 003. The connection is in autocommit, so the lone
    statement is its own transaction, with no BEGIN (which statement pooling refuses)."""
    cur = conn.execute(strategy.statements["claim"],
                       sample_params(strategy, "claim", worker=worker, batch=batch, lease_seconds=LEASE_SECONDS))
    return [Claimed(r[0], r[1] if len(r) > 1 else None) for r in cur.fetchall()]


def complete(conn: psycopg.Connection, strategy: Strategy, worker: str, jobs: list[Claimed]) -> None:
    """Complete claimed jobs in one short transaction (no-op for a claim that also completes): their
    statements in one message, bound on the client, which the server runs as one implicit transaction,
    so no BEGIN is sent (statement pooling refuses it) and it costs one round trip."""
    if not jobs or not strategy.has_complete:
        return
    cursor = conn.cursor() if isinstance(conn, StatelessConnection) else psycopg.ClientCursor(conn)
    with cursor:
        # ";\n": a section's last line may be a comment, which would swallow a "; " after it.
        cursor.execute(";\n".join(cursor.mogrify(strategy.statements["complete"],
                                                   sample_params(strategy, "complete", id=j.id, attempts=j.attempts,
                                                                 worker=worker)) for j in jobs))


def process_jobs(conn: psycopg.Connection, strategy: Strategy, jobs: int, worker: str) -> int:
    """Claim and complete until `jobs` jobs are done or none are left; returns how many."""
    done = 0
    while done < jobs:
        claimed = claim(conn, strategy, worker, min(CLAIM_BATCH, jobs - done))
        if not claimed:
            break
        complete(conn, strategy, worker, claimed)
        done += len(claimed)
    return done


def flush_stats(conn: psycopg.Connection) -> None:
    """Push this backend's pending statistics (n_dead_tup counts) to shared memory now."""
    if conn.info.server_version >= FORCE_FLUSH_MIN_VERSION:
        conn.execute(PROBE_QUERIES["force_stats_flush"])


@dataclass(frozen=True)
class TableStats:
    n_dead_tup: int
    n_live_tup: int
    table_bytes: int

    def as_dict(self) -> dict:
        return {"n_dead_tup": self.n_dead_tup, "n_live_tup": self.n_live_tup, "table_bytes": self.table_bytes}


def table_stats(conn: psycopg.Connection) -> TableStats:
    """n_dead_tup and the table's size. Statistics are asynchronous: callers flush the writers'
    first (15+); before 15 we read until two reads agree."""
    def read() -> TableStats:
        conn.execute(PROBE_QUERIES["clear_stats_snapshot"])
        return TableStats(*conn.execute(PROBE_QUERIES["table_stats"]).fetchone())

    stats = read()
    if conn.info.server_version >= FORCE_FLUSH_MIN_VERSION:
        return stats
    deadline = time.monotonic() + STATS_SETTLE_TIMEOUT_S
    while time.monotonic() < deadline:
        time.sleep(STATS_POLL_S)
        again = read()
        if again == stats:
            break
        stats = again
    return stats


def human_bytes(n: int) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return str(n)
