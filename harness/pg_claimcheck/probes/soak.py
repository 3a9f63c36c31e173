"""The sustained variant of the vacuum probe: what a held snapshot costs a busy queue over time.

Workers run a steady enqueue / claim / complete loop for a while, first with nothing held
open, then with a read-only REPEATABLE READ transaction held for the whole phase. A few
samples of throughput, n_dead_tup and table size per phase make the cost of a held xmin a
figure: dead row versions pile up, the table and its ready index grow, and each claim has to
step over more dead index entries.
"""
from __future__ import annotations

import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass

import psycopg
from psycopg import IsolationLevel

from pg_claimcheck.contract.strategy import Strategy
from pg_claimcheck.probes import PROBE_QUERIES
from pg_claimcheck.probes._verbose import VacuumFigures
from pg_claimcheck.probes._work import CLAIM_BATCH, TableStats, claim, complete, connect, flush_stats, table_stats
from pg_claimcheck.probes.vacuum import horizon_of, vacuum_verbose
from pg_claimcheck.server.runcontext import RunContext
from pg_claimcheck.server.schema import build_jobs_table

SOAK_PHASES = ("none", "repeatable-read")
SOAK_BACKLOG_JOBS = 500  # queued at the start, so workers never find the queue empty
SOAK_WORKERS = 2
SOAK_SAMPLES = 4
JOIN_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class SoakSample:
    """One look at the table during a phase."""

    elapsed_s: float
    jobs_done: int
    jobs_per_s: float
    """Throughput since the previous sample."""
    stats: TableStats
    holder_xmin_age: int | None

    def as_dict(self) -> dict:
        return {"elapsed_s": round(self.elapsed_s, 3), "jobs_done": self.jobs_done,
                "jobs_per_s": round(self.jobs_per_s, 1), **self.stats.as_dict(),
                "holder_xmin_age": self.holder_xmin_age}


@dataclass(frozen=True)
class SoakPhase:
    holder: str
    seconds: float
    workers: int
    jobs_done: int
    samples: list[SoakSample]
    vacuum: VacuumFigures
    """VACUUM (VERBOSE) at the end of the phase, the holder still open."""

    @property
    def jobs_per_s(self) -> float:
        return self.jobs_done / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict:
        return {"holder": self.holder, "seconds": round(self.seconds, 3), "workers": self.workers,
                "jobs_done": self.jobs_done, "jobs_per_s": round(self.jobs_per_s, 1),
                "samples": [s.as_dict() for s in self.samples], "vacuum_at_end": self.vacuum.as_dict()}


class _Counter:
    """Jobs done across worker threads; each loop adds under the lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.done = 0

    def add(self, n: int) -> None:
        with self.lock:
            self.done += n


def _steady_worker(conn: psycopg.Connection, strategy: Strategy, name: str, stop: threading.Event,
                   counter: _Counter, errors: list[BaseException]) -> None:
    """Enqueue a batch, claim a batch, complete it: a producer and a consumer in one loop."""
    try:
        while not stop.is_set():
            conn.execute(PROBE_QUERIES["enqueue_jobs"], {"jobs": CLAIM_BATCH, "queue": "default"})
            claimed = claim(conn, strategy, name)
            complete(conn, strategy, name, claimed)
            counter.add(len(claimed))
        flush_stats(conn)
    except BaseException as exc:  # reported by the phase, which stops the others
        errors.append(exc)
        stop.set()


def run_phase(coordinator: psycopg.Connection, run: RunContext, strategy: Strategy,
              holder: str, seconds: float, workers: int = SOAK_WORKERS, samples: int = SOAK_SAMPLES) -> SoakPhase:
    build_jobs_table(coordinator, run.schema, SOAK_BACKLOG_JOBS)
    coordinator.execute(PROBE_QUERIES["autovacuum_off"])
    stop, counter, errors = threading.Event(), _Counter(), []
    with ExitStack() as stack:
        holder_pid = None
        if holder == "repeatable-read":
            holding = connect(run, "soak-holder", stack)
            holding.autocommit, holding.isolation_level = False, IsolationLevel.REPEATABLE_READ
            holding.execute(PROBE_QUERIES["read_one"]).fetchone()
            holder_pid = holding.info.backend_pid
        conns = [connect(run, f"soak-w{i:02d}", stack, worker=True) for i in range(workers)]
        threads = [threading.Thread(target=_steady_worker, args=(c, strategy, f"soak-w{i:02d}", stop, counter, errors),
                                    daemon=True) for i, c in enumerate(conns)]
        started = time.monotonic()
        try:
            for t in threads:
                t.start()
            taken = _sample_until(coordinator, started, seconds, samples, counter, holder_pid, stop)
        finally:
            stop.set()
            for t in threads:
                t.join(JOIN_TIMEOUT_S)
        if errors:
            raise errors[0]
        elapsed = time.monotonic() - started
        # The workers flushed their statistics on the way out: the last sample is exact.
        taken.append(_sample(coordinator, elapsed, counter.done, taken, holder_pid))
        figures = vacuum_verbose(coordinator, run.schema)
    return SoakPhase(holder, elapsed, workers, counter.done, taken, figures)


def _sample_until(coordinator: psycopg.Connection, started: float, seconds: float, samples: int,
                  counter: _Counter, holder_pid: int | None, stop: threading.Event) -> list[SoakSample]:
    taken: list[SoakSample] = []
    interval = seconds / samples
    for k in range(1, samples):  # the last sample is taken after the workers stop
        if stop.wait(max(0.0, started + k * interval - time.monotonic())):
            break
        taken.append(_sample(coordinator, time.monotonic() - started, counter.done, taken, holder_pid))
    stop.wait(max(0.0, started + seconds - time.monotonic()))
    return taken


def _sample(coordinator: psycopg.Connection, elapsed: float, done: int, previous: list[SoakSample],
            holder_pid: int | None) -> SoakSample:
    last_t, last_done = (previous[-1].elapsed_s, previous[-1].jobs_done) if previous else (0.0, 0)
    rate = (done - last_done) / (elapsed - last_t) if elapsed > last_t else 0.0
    return SoakSample(elapsed, done, rate, table_stats(coordinator), horizon_of(coordinator, holder_pid).xmin_age)


def run_soak(coordinator: psycopg.Connection, run: RunContext, strategy: Strategy,
             seconds: float) -> list[SoakPhase]:
    return [run_phase(coordinator, run, strategy, holder, seconds) for holder in SOAK_PHASES]
