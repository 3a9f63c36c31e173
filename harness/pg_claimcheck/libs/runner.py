"""The coordinator of a library run: a database of its own, the library's schema and jobs, N
worker processes running the library's own loop, faults, the stop, and the ledger's verdict.

The run ends when the library's own table says every job is finished (done or failed), when
nothing has moved for the supervisor's stall limit (pg_claimcheck.engine.supervisor; then `stopped_by`
is `stalled` and unfinished jobs fail the run), or at `--duration`, counted from the first worker's
hello: a worker's start-up, until it says hello (the first line of its records), is neither a stall
nor the library's working time. Workers are then asked to stop (SIGTERM, the library's graceful
stop) and killed after STOP_GRACE_S. A worker that exits on its own before the
end (its connection was terminated, the server restarted) is replaced, as a process supervisor
would, up to MAX_REPLACEMENTS times. The run is judged as every claim run is: a RunRecord and the
library's table handed to pg_claimcheck.engine.judge.judge_run.
With `pgbench`, the library's own SQL then runs through pgbench in the same database
(:mod:`pg_claimcheck.libs.parity`) before it is dropped.
"""
from __future__ import annotations

import dataclasses
import math
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import psycopg

from pg_claimcheck.contract.strategy import Strategy
from pg_claimcheck.engine import feedfigures
from pg_claimcheck.engine import producer as producing
from pg_claimcheck.engine.faults import FaultInjector
from pg_claimcheck.engine.judge import RunRecord, judge_run
from pg_claimcheck.engine.sampler import LockWaitSampler
from pg_claimcheck.engine.supervisor import MAX_REPLACEMENTS, TICK_S, Supervisor
from pg_claimcheck.engine.worker import worker_role
from pg_claimcheck.errors import ServerError
from pg_claimcheck.libs._adapter import STOP_GRACE_S, LibraryAdapter, WorkerConfig
from pg_claimcheck.libs.database import run_database
from pg_claimcheck.libs.feed import LibraryFeed
from pg_claimcheck.libs.parity import run_cycle
from pg_claimcheck.libs.records import to_ledger
from pg_claimcheck.server import children, interrupts
from pg_claimcheck.server.leftovers import records_dir
from pg_claimcheck.server.provision import Server
from pg_claimcheck.server.runcontext import RunContext
from pg_claimcheck.server.schema import SeededJobs
from pg_claimcheck.server.session import run_id_from_env
from pg_claimcheck.settings import FaultPlan, Mode, RunSettings, StopReason, WorkTime
from pg_claimcheck.verdict.ledger import WorkerLog
from pg_claimcheck.verdict.observed import WorkerTelemetry
from pg_claimcheck.verdict.result import RunResult, TableOutcome

RECOVER_EVERY_S = 0.5
"""How often the library's documented recovery runs under --faults; the JSON shows it as `reap_every_s`
(library runs are lifecycle runs: jobs may come back, so results carry redeliveries)."""
RESTART_WAIT_S = 30.0
"""How long the coordinator waits for a restarted server to take connections again."""
WORKER_STDERR_SHOWN = 600
UNFINISHED_SHOWN = 20
START_UP_S = 120.0
"""The longest a worker may take to say hello (its imports, or its runtime's start-up: Node, Ruby) before the
stall limit counts."""


LIB_JOBS = 5_000
"""`lib`'s jobs per run, as `bench`'s: a library that runs one job per fetch (procrastinate) does a few
hundred a second, so a run takes tens of seconds, not minutes."""
LIB_WORK_MS = "1"
"""Work per execution, as `bench`'s --work-ms: a job that takes some time, as real ones do."""
FAULT_WORK_MS = "2"
"""Under --faults each execution lasts 2 ms, so a SIGKILL finds a worker mid-task."""


def lib_settings(workers: int, jobs: int, work_ms: str | None = None, faults: bool = False,
                 duration_s: float | None = None, rate_per_s: float | None = None) -> RunSettings:
    """One library run's settings. The library batches, leases and retries in its own way, so batch
    and mode are fixed: every library here claims, commits, and works outside the claim."""
    work = WorkTime.parse(str(work_ms) if work_ms is not None else (FAULT_WORK_MS if faults else LIB_WORK_MS))
    # With --rate, --duration is the producer's (pg_claimcheck.libs.feed): the workers drain after it.
    duration_s, produce_s = (None, duration_s) if rate_per_s is not None else (duration_s, None)
    return RunSettings(workers=workers, jobs=jobs, batch=1, mode=Mode.LEASE, work=work, duration_s=duration_s,
                       reap_every_s=RECOVER_EVERY_S, faults=FaultPlan() if faults else None,
                       rate_per_s=rate_per_s, produce_s=produce_s)


@dataclass
class _Proc:
    popen: subprocess.Popen
    last_alive: float
    spawned: float


class _StallFlags:
    """A library worker's stall switch (pg_claimcheck.engine.shared.Slots): the fault injector's
    `stall[worker] = STALL_ASKED` is a flag file its recording task checks at the start of each
    execution."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, worker: int) -> Path:
        return self.directory / f"stall-w{worker:02d}"

    def __getitem__(self, worker: int) -> int:
        return int(self.path(worker).exists())

    def __setitem__(self, worker: int, value: int) -> None:
        if value:
            self.path(worker).touch()


class _LibraryTable:
    """The library's own table, as the judge asks it (pg_claimcheck.engine.judge.JobTable)."""

    def __init__(self, adapter: LibraryAdapter, conn: psycopg.Connection, key_ids: dict[int, object]) -> None:
        self.adapter, self.conn, self.key_ids = adapter, conn, key_ids

    def outcome(self, seeded: SeededJobs, logs: list[WorkerLog]) -> TableOutcome:
        return self.adapter.outcome(self.conn)

    def final_status(self, jobs: set) -> dict:
        return self.adapter.final_status(self.conn, {k: self.key_ids[k] for k in jobs})

    def unrecorded(self, never: list[int]) -> None:
        return None  # a dead worker's executions are mapped by pg_claimcheck.libs.records (its deaths)


def library_strategy(adapter: LibraryAdapter) -> Strategy:
    """A library shown where a strategy would be: its name, version and promise."""
    return Strategy(name=adapter.name, statements={}, source=f"{adapter.distribution} {adapter.version()}",
                    summary=f"{adapter.promise} ({adapter.docs})")


def run_library(server: Server, adapter: LibraryAdapter, settings: RunSettings,
                progress: Callable[[int, float], None] | None = None, run_id: str | None = None,
                pgbench: bool = False) -> RunResult:
    """One library x setting, in a database of its own that is dropped after; with `pgbench`, its
    worker cycle through pgbench too, on a freshly enqueued table in that database. A library that cannot
    be set up on this server is refused before, by the use case (pg_claimcheck.app.preflight)."""
    run_id = run_id or run_id_from_env()  # as every run: $CLAIMCHECK_RUN_ID names what it creates
    with run_database(server, run_id, adapter.name) as run, records_dir(run_id) as tmp:
        result = _Run(server, adapter, settings, run, tmp, progress).go()
        if pgbench:
            result = dataclasses.replace(result, pgbench=run_cycle(adapter, run, server.bin_dir, settings))
        return result


class _Run:
    def __init__(self, server: Server, adapter: LibraryAdapter, settings: RunSettings, run: RunContext,
                 tmp: Path, progress: Callable[[int, float], None] | None) -> None:
        self.server, self.adapter, self.settings, self.tmp, self.progress = server, adapter, settings, tmp, progress
        # The run's own database; its connections are named as every run's are (pg_claimcheck.server.runcontext),
        # so the sampler and the terminate fault find them. The library connects with a DSN string.
        self.run = run
        self.dsn = self.run.role_dsn("coordinator")
        self.procs: dict[int, _Proc] = {}
        self.deaths: dict[int, float] = {}
        self.replacements = 0
        self.next_index = 0
        self.stall = _StallFlags(tmp)
        self.conn: psycopg.Connection | None = None
        """The coordinator's connection to the run's database (replaced after a restart fault)."""
        self.feed_plan = None if settings.rate_per_s is None else producing.ProducerPlan(
            run=self.run, strategy=library_strategy(adapter), rate_per_s=settings.rate_per_s,
            duration_s=settings.produce_s, first_key=settings.jobs + 1)
        """`lib --rate`: the schedule, its keys after the seeded ones."""
        self.feed: LibraryFeed | None = None
        self.feed_at = 0.0
        """When the feed was started (its runtime's start-up is not a stall either)."""
        self.up: set[int] = set()
        """Workers whose runtime said it was up (an external worker's hello): see _up."""

    def _up(self) -> int:
        """How many workers have said they are up so far: each is activity to the supervisor, so a
        runtime's start-up (eight Rubies loading ActiveRecord at once on a loaded machine: over 30 s
        seen at load 44 on 2 cores; two Pythons importing dbos: 20 s at load 35) is not a stall."""
        self.up |= {i for i in self.procs if i not in self.up and self.adapter.said_hello(self._records(i))}
        return len(self.up)

    def _starting(self, now: float) -> bool:
        """Is a live worker still starting (spawned under START_UP_S ago, no hello yet), a replacement too?"""
        return any(i not in self.up and now - p.spawned < START_UP_S and children.running(p.popen)
                   for i, p in self.procs.items())

    def _records(self, index: int) -> Path:
        """Worker `index`'s records file (pg_claimcheck.libs.records reads them all as w*.tsv)."""
        return self.tmp / f"w{index:02d}.tsv"

    def _spawn(self) -> int:
        index = self.next_index
        self.next_index += 1
        config = WorkerConfig(
            library=self.adapter.name, worker=index, records=str(self._records(index)),
            dsn=self.run.role_dsn(worker_role(index), worker=True),
            stall_flag=str(self.stall.path(index)), work_ms=str(self.settings.work),
            stall_s=(self.settings.faults.stall_factor * self.adapter.lease_s) if self.settings.faults else 0.0,
            faults=self.settings.faults is not None)
        with open(self.tmp / f"w{index:02d}.err", "wb") as stderr, interrupts.deferred():
            popen = self.adapter.spawn(config, stderr)  # kept before a Ctrl-C is raised (children.start)
            now = time.monotonic()
            self.procs[index] = _Proc(popen, now, now)
        return index

    def go(self) -> RunResult:
        adapter, settings = self.adapter, self.settings
        seed_started = time.perf_counter()
        adapter.install(self.dsn)
        ids = adapter.enqueue(self.dsn, range(1, settings.jobs + 1))
        seeded = SeededJobs(first_id=1, last_id=settings.jobs, count=len(ids), seconds=time.perf_counter() - seed_started)
        self.conn = self.run.connect("coordinator", in_schema=False)
        try:
            return self._run_and_judge(ids, seeded)
        finally:
            self.conn.close()  # the one _monitor may have replaced after a restart fault

    def _run_and_judge(self, ids: list, seeded: SeededJobs) -> RunResult:
        adapter, settings = self.adapter, self.settings
        sampler = LockWaitSampler(self.run)
        origin = time.monotonic()
        injector = (FaultInjector(settings.faults, settings.jobs, self.run, origin, self.server.restart)
                    if settings.faults else None)
        recovered = 0
        try:
            for _ in range(settings.workers):
                self._spawn()
            sampler.start()
            stopped_by, recovered = self._monitor(injector, origin)
            fed_log = self.feed.finish() if self.feed is not None else None
        finally:
            if self.feed is not None:
                self.feed.close()
            self._stop_all()
            waits = sampler.stop()
        self.conn = conn = self.run.reconnected(self.conn, in_schema=False, wait_s=RESTART_WAIT_S)
        unfinished = adapter.unfinished(conn, UNFINISHED_SHOWN)
        files, version = adapter.worker_records(self.tmp)
        logs, reaps, executions = to_ledger(files, self.deaths, adapter.stall_release_s,
                                            _terminations(injector, files), adapter.completion_lag_s,
                                            adapter.lease_s, adapter.claim_lease_s)
        fed, telemetry = None, []  # the library's workers measure nothing of ours but a rate run's latencies
        if fed_log is not None:  # the seeded jobs and the produced ones it committed, judged by judge_run
            telemetry = [WorkerTelemetry(worker=log.worker,
                                         latency_histograms=self.feed_plan.histograms(fed_log.started_at, log))
                         for log in logs]
            fed = feedfigures.outcome(self.feed_plan, [fed_log], logs, telemetry)
            adapter.fed(fed_log.enqueued)  # before the table's last reading
        starts = [ex.started for ex in executions]
        ends = [ex.ended for ex in executions if not math.isnan(ex.ended)]
        record = RunRecord(
            # A library that stopped moving with jobs left (stalled) has lost them as surely as one that
            # drained without them: judged as a drain, its unrun jobs are lost, never "kept its promise".
            logs=logs, telemetry=telemetry, stopped_by=stopped_by, drained=stopped_by in (StopReason.DRAINED, StopReason.STALLED),
            span=(min(starts), max(ends)) if starts and ends else (origin, origin), origin=origin,
            observed_s=(max(ends) - origin) if ends else 0.0, reaps=reaps, killed=injector.killed if injector else set(),
            faults=injector.events if injector else [],
            faults_skipped=(injector.skipped + injector.kinds) if injector else [],  # as the fork driver: never due too
            stalled={ex.worker: ex.key for ex in executions if not math.isnan(ex.stalled_at)},
            waits=waits, claim_statements=len(executions), workers_replaced=self.replacements)
        table = _LibraryTable(adapter, conn, dict(zip(range(1, settings.jobs + 1), ids)))
        # `reaped` counts the jobs the library's documented recovery gave back, not the releases the
        # ledger read from its records (record.reaps).
        result = judge_run(record, table, library_strategy(adapter), settings, seeded, releases=True, fed=fed,
                           delivery=adapter.delivery)
        v = result.verdict
        return dataclasses.replace(result, reaped=recovered, library={
            "name": adapter.name, "version": version, "promise": adapter.promise, "docs": adapter.docs,
            "delivery": adapter.delivery, "lost_as_promised": v.lost_as_promised,
            "reruns_against_promise": v.reruns_against_promise,
            "recovered": recovered, "workers_replaced": self.replacements, "unfinished": unfinished,
            "worker_errors": self._errors()})

    def _monitor(self, injector: FaultInjector | None, origin: float) -> tuple[StopReason, int]:
        settings, adapter = self.settings, self.adapter
        supervisor = Supervisor(settings, origin, extra_stall_s=adapter.recovery_s if settings.faults else 0.0)
        next_recover, recovered = 0.0, 0
        first_up: float | None = None
        while True:
            time.sleep(TICK_S)
            now = time.monotonic()
            self._replace_dead(now, injector)
            if self.feed is not None:
                adapter.fed(self.feed.enqueued.value)
            try:
                table = adapter.outcome(self.conn)
            except psycopg.OperationalError:  # a restart fault: ask again once the server is back
                self.conn = self.run.reconnected(self.conn, in_schema=False, wait_s=RESTART_WAIT_S)
                continue
            finished = table.done + table.failed
            started = finished + table.running
            if self.progress:
                self.progress(finished, now - origin)
            # Every fault whose mark has passed, before the drain check: a fast library can take all
            # its jobs between two ticks, and a fault asked for must still land.
            while injector and injector.due(started):
                alive = {i: p.popen.pid for i, p in self.procs.items() if children.running(p.popen)}
                injector.inject(alive, self.stall, self._spawn)
            if self.feed_plan is not None and self.feed is None and started > 0:
                # `lib --rate` (pg_claimcheck.libs.feed): the schedule starts once the library's workers run, at
                # their first job, so a slow start-up is not charged to the first produced jobs' latency.
                self.feed, self.feed_at = LibraryFeed(adapter, self.dsn, self.feed_plan), now
            feeding = self.feed_plan is not None and (self.feed is None or self.feed.feeding)
            produced = self.feed.enqueued.value if self.feed is not None else 0
            if not feeding and finished >= settings.jobs + produced and table.queued == 0 and table.running == 0:
                return StopReason.DRAINED, recovered
            # Only the table is seen, not the claims: a change in what it shows done or running is activity,
            # and so is a job produced (a fed queue idle between arrivals is no stall).
            # Until a worker says hello, or the feed its first job (up to START_UP_S each), its runtime is
            # starting, not stalled; and --duration is the library's working time, from the first hello.
            up = self._up()
            if up and first_up is None:
                first_up = supervisor.started = now
            starting = self._starting(now) or (
                self.feed is not None and self.feed.feeding and not produced and now - self.feed_at < START_UP_S)
            supervisor.saw(now, (finished, table.running, produced, up, now if starting else 0.0))
            limit = supervisor.limit(now)
            if limit is not None:
                return (StopReason.STALLED if limit == StopReason.STALLED else StopReason.DURATION), recovered
            if settings.faults and now >= next_recover:
                next_recover = now + RECOVER_EVERY_S
                try:
                    recovered += len(adapter.recover(self.dsn, {i: self._records(i) for i in self.deaths}))
                except psycopg.OperationalError:
                    pass  # the server is restarting; the next round recovers

    def _replace_dead(self, now: float, injector: FaultInjector | None) -> None:
        for index, proc in list(self.procs.items()):
            if children.running(proc.popen):
                proc.last_alive = now
                continue
            del self.procs[index]
            # What its library started (chancy's multiprocessing manager, sidequest's forked engine) outlives
            # the worker: its group goes with it.
            children.stop([proc.popen], ask=None, within_s=0)
            killed = injector is not None and index in injector.killed
            event = next((e for e in (injector.events if injector else []) if e.kind == "kill" and e.worker == index),
                         None)
            self.deaths[index] = (event.at_s + injector.origin) if killed and event else proc.last_alive
            if killed:
                continue  # the injector started its replacement
            self.replacements += 1
            if self.replacements > MAX_REPLACEMENTS:
                raise ServerError(f"{self.adapter.name} workers keep exiting ({self.replacements} so far); the last "
                                  f"one said: {self._stderr(index) or 'nothing'}")
            self._spawn()

    def _errors(self) -> list[str]:
        """The last line each worker printed on stderr (a library loop that died says why)."""
        found = []
        for path in sorted(self.tmp.glob("w*.err")):
            lines = path.read_text(errors="replace").strip().splitlines()
            if lines:
                found.append(lines[-1][-WORKER_STDERR_SHOWN:])
        return found

    def _stderr(self, index: int) -> str:
        path = self.tmp / f"w{index:02d}.err"
        text = path.read_text(errors="replace").strip() if path.exists() else ""
        return text[-WORKER_STDERR_SHOWN:]

    def _stop_all(self) -> None:
        """The library's graceful stop (SIGTERM), SIGKILL after STOP_GRACE_S, and what each worker's library
        started with it."""
        children.stop([proc.popen for proc in self.procs.values()], within_s=STOP_GRACE_S)


def _terminations(injector: FaultInjector | None, files: dict[int, str]) -> dict[int, list[float]]:
    """When each worker lost its connection to a fault: its backend terminated, or a restart (all)."""
    found: dict[int, list[float]] = {}
    for event in injector.events if injector else []:
        at = event.at_s + injector.origin
        if event.kind == "terminate" and event.worker is not None:
            found.setdefault(event.worker, []).append(at)
        elif event.kind == "restart":
            for worker in files:
                found.setdefault(worker, []).append(at)
    return found
