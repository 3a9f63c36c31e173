"""The driver: N worker processes against a freshly seeded table, started together, until drained.

One call of :func:`run_strategy` is one strategy x setting: build the table, check the strategy on
the server, fork the workers, release them through a barrier, watch progress (and stalls,
and the time limit), collect each worker's log, and hand the logs to the ledger.
"""
from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

import psycopg

from harness.errors import ClaimcheckError, Interrupted, ServerError
from harness.ledger import Verdict, WorkerLog, judge
from harness.queries import QUERIES
from harness.sampler import LockWaitSampler, WaitSamples
from harness.schema import SeededJobs, build_jobs_table
from harness.settings import RunSettings
from harness.stats import latency_summary
from harness.strategy import Strategy, validate_on_server
from harness.timeline import claims_over_time
from harness.worker import BARRIER_TIMEOUT_S, WorkerPlan, worker_main

if TYPE_CHECKING:
    from harness.pgbench import PgbenchResult

MONITOR_INTERVAL_S = 0.1
STALL_TIMEOUT_S = 30.0
"""No claim by any worker for this long (plus the time a batch of work may take) ends a run."""
JOIN_TIMEOUT_S = 10.0

ProgressCallback = Callable[[int, float], None]
"""Called with (claims so far, seconds since start) while a run goes."""


@dataclass(frozen=True)
class TableOutcome:
    """The jobs table after the run, read from the server."""

    done: int
    queued: int
    running: int
    failed: int
    max_attempts: int


@dataclass(frozen=True)
class RunResult:
    """One strategy x setting: what the ledger, the sampler and the table say."""

    strategy: Strategy
    settings: RunSettings
    seeded: SeededJobs
    verdict: Verdict
    waits: WaitSamples
    table: TableOutcome
    elapsed_s: float
    stopped_by: str
    """`drained`, `duration`, `claims-per-worker` or `stalled`."""
    claim_latency_ms: dict
    serialization_failures: int
    deadlocks: int
    claim_statements: int
    claims_over_time: dict = field(default_factory=dict)
    """Per-worker claims per time bucket (see :mod:`harness.timeline`)."""
    pgbench: "PgbenchResult | None" = None
    """The same SQL through pgbench on the same table size, when asked for (`bench --pgbench`)."""

    @property
    def pgbench_ratio(self) -> float | None:
        """Our jobs/s over pgbench's: 1.0 means the driver costs nothing over pgbench's C client."""
        if self.pgbench is None or self.pgbench.jobs_per_s <= 0:
            return None
        return self.throughput_jobs_per_s / self.pgbench.jobs_per_s

    @property
    def throughput_jobs_per_s(self) -> float:
        return self.table.done / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def as_dict(self) -> dict:
        """One run object of the JSON contract in DESIGN.md."""
        v, s = self.verdict, self.settings
        return {
            "strategy": self.strategy.name,
            "source": self.strategy.source,
            "isolation": self.strategy.isolation,
            "expected": self.strategy.expected,
            "workers": s.workers,
            "jobs": s.jobs,
            "batch": s.batch,
            "mode": s.mode,
            "work_ms": str(s.work),
            "claims": v.claims,
            "unique_jobs_claimed": v.unique_jobs_claimed,
            "double_claimed_jobs": v.double_claimed_jobs,
            "extra_claims": v.extra_claims,
            "unclaimed_jobs": v.unclaimed_jobs,
            "unexpected_jobs": v.unexpected_jobs,
            "stale_completions": v.stale_completions,
            "jobs_done": self.table.done,
            "max_attempts": self.table.max_attempts,
            "serialization_failures": self.serialization_failures,
            "deadlocks": self.deadlocks,
            "claim_statements": self.claim_statements,
            "elapsed_s": round(self.elapsed_s, 4),
            "throughput_jobs_per_s": round(self.throughput_jobs_per_s, 1),
            "claim_latency_ms": self.claim_latency_ms,
            "wait_events": dict(self.waits.events.most_common()),
            "wait_samples": self.waits.samples,
            "max_waiting_workers": self.waits.max_waiting_workers,
            "stopped_by": self.stopped_by,
            "seed_seconds": round(self.seeded.seconds, 3),
            "exactly_once": v.exactly_once,
            "violations": [x.as_dict() for x in v.violations],
            "pgbench_jobs_per_s": None if self.pgbench is None else round(self.pgbench.jobs_per_s, 1),
            "pgbench_ratio": None if self.pgbench_ratio is None else round(self.pgbench_ratio, 3),
            "pgbench": None if self.pgbench is None else self.pgbench.as_dict(),
            "claims_over_time": self.claims_over_time,
        }


def run_strategy(conn: psycopg.Connection, dsn: str, schema: str, run_id: str, strategy: Strategy,
                 settings: RunSettings, on_progress: ProgressCallback | None = None) -> RunResult:
    """Seed, check, run and judge one strategy x setting. `conn` is the coordinator's, in `schema`."""
    seeded = build_jobs_table(conn, schema, settings.jobs)
    validate_on_server(conn, strategy)
    _check_headroom(conn, settings.workers)
    plan = WorkerPlan(dsn=dsn, schema=schema, app_prefix=f"claimcheck/{run_id}/", strategy=strategy,
                      settings=settings)
    logs, stopped_by, waits = _run_workers(plan, on_progress)
    outcome = TableOutcome(*conn.execute(QUERIES["table_outcome"]).fetchone())
    # The run is the span of the workers' own clocks: from the first release from the barrier
    # to the last worker's end (the coordinator wakes from the barrier a little later than they do).
    started = min(log.started_at for log in logs)
    finished = max(log.finished_at for log in logs)
    verdict = judge(logs, seeded.first_id, seeded.last_id, drained=settings.drains, origin=started)
    latencies = [x for log in logs for x in log.claim_latency_ms]
    return RunResult(
        strategy=strategy, settings=settings, seeded=seeded, verdict=verdict, waits=waits, table=outcome,
        elapsed_s=finished - started, stopped_by=stopped_by,
        claim_latency_ms=latency_summary(latencies),
        serialization_failures=sum(log.serialization_failures for log in logs),
        deadlocks=sum(log.deadlocks for log in logs),
        claim_statements=sum(log.claim_statements for log in logs),
        claims_over_time=claims_over_time(logs, started, finished - started),
    )


def _check_headroom(conn: psycopg.Connection, workers: int) -> None:
    free = conn.execute(QUERIES["connection_headroom"]).fetchone()[0]
    if free < workers + 1:
        raise ServerError(f"the server has room for {free} more connections but the run needs {workers + 1} "
                          "(workers and the sampler); lower --workers or raise max_connections")


def _run_workers(plan: WorkerPlan, on_progress: ProgressCallback | None
                 ) -> tuple[list[WorkerLog], str, WaitSamples]:
    settings = plan.settings
    # fork: workers start in milliseconds. No thread of ours is running at this point
    # (the sampler of a previous run has been joined), which is what makes fork safe.
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(settings.workers + 1)
    stop = ctx.Value("b", 0, lock=False)
    progress = ctx.Array("q", settings.workers, lock=False)
    receivers, processes = [], []
    sampler: LockWaitSampler | None = None
    finished = False
    try:
        for index in range(settings.workers):
            receiver, sender = ctx.Pipe(duplex=False)
            process = ctx.Process(target=worker_main, args=(plan, index, barrier, stop, progress, sender),
                                  name=f"claimcheck-w{index:02d}", daemon=True)
            process.start()
            sender.close()
            receivers.append(receiver)
            processes.append(process)
        sampler = LockWaitSampler(plan.dsn, plan.app_prefix)
        sampler.start()
        try:
            barrier.wait(BARRIER_TIMEOUT_S)
        except threading.BrokenBarrierError:
            logs = _collect(receivers, processes, deadline=time.monotonic() + JOIN_TIMEOUT_S)
            errors = [log.error for log in logs if log.error] or ["workers did not reach the start barrier"]
            raise ServerError(f"workers could not start: {errors[0]}") from None
        started = time.monotonic()
        logs, stopped_by = _monitor(receivers, progress, stop, settings, started, on_progress)
        waits = sampler.stop()
        sampler = None
        errors = [log.error for log in logs if log.error]
        if errors:
            raise ClaimcheckError(f"a worker failed mid-run, so the run is not judged: {errors[0]}")
        finished = True
        return logs, stopped_by, waits
    except KeyboardInterrupt:
        raise Interrupted("interrupted: workers stopped before the run finished") from None
    finally:
        if sampler is not None:
            sampler.stop()
        _reap(processes, graceful=finished)


def _monitor(receivers: list, progress, stop, settings: RunSettings, started: float,
             on_progress: ProgressCallback | None) -> tuple[list[WorkerLog], str]:
    logs: dict[int, WorkerLog] = {}
    stopped_by = "drained" if settings.drains else (
        "duration" if settings.duration_s is not None else "claims-per-worker")
    stall_limit = STALL_TIMEOUT_S + 2 * settings.batch * max(settings.work.a_ms, settings.work.b_ms) / 1000
    last_claims, last_change = -1, started
    pending = dict(enumerate(receivers))
    while pending:
        for receiver in multiprocessing.connection.wait(list(pending.values()), MONITOR_INTERVAL_S):
            index = next(i for i, r in pending.items() if r is receiver)
            try:
                logs[index] = receiver.recv()
            except EOFError:  # the process died without sending its log
                logs[index] = WorkerLog(worker=index, error=f"worker {index} died without a word")
            del pending[index]
        now = time.monotonic()
        claims = sum(progress)
        if claims != last_claims:
            last_claims, last_change = claims, now
        if on_progress:
            on_progress(claims, now - started)
        if settings.duration_s is not None and now - started >= settings.duration_s:
            stop.value = 1
        elif now - last_change > stall_limit and not stop.value:
            stop.value, stopped_by = 1, "stalled"
    return [logs[i] for i in sorted(logs)], stopped_by


def _collect(receivers: list, processes: list, deadline: float) -> list[WorkerLog]:
    logs = []
    for receiver in receivers:
        if receiver.poll(max(0.0, deadline - time.monotonic())):
            try:
                logs.append(receiver.recv())
            except EOFError:
                pass
    return logs


def _reap(processes: list, graceful: bool) -> None:
    """Leave no worker behind, whatever happened. Finished workers get time to exit on their own."""
    if graceful:
        deadline = time.monotonic() + JOIN_TIMEOUT_S
        for process in processes:
            process.join(max(0.0, deadline - time.monotonic()))
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(JOIN_TIMEOUT_S)
        if process.is_alive():
            process.kill()
            process.join()
