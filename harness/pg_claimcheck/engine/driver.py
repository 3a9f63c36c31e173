"""The driver: N worker processes against a freshly seeded table, started together, until drained.

One call of :func:`run_strategy` is one strategy x setting: build the table, check the strategy on
the server, fork the workers, release them through a barrier, watch progress (and stalls, the time
limit, the reaper and injected faults), merge the records each worker streams back, and hand the
combined logs to the ledger.
"""
from __future__ import annotations

import dataclasses
import multiprocessing
import multiprocessing.connection
import selectors
import threading
import time

import psycopg

from pg_claimcheck.contract.queries import QUERIES
from pg_claimcheck.contract.strategy import ClaimShape, Strategy, validate_on_server
from pg_claimcheck.engine import feedfigures, wakeup
from pg_claimcheck.engine import producer as producing
from pg_claimcheck.engine.faults import FaultEvent, FaultInjector
from pg_claimcheck.engine.judge import RunRecord, RunTable, judge_run
from pg_claimcheck.engine.logstream import LogDelta, apply_summary, receive
from pg_claimcheck.engine.reaper import Reaper
from pg_claimcheck.engine.sampler import RunSamplers, StuckBackend, WaitSamples, stuck_backends
from pg_claimcheck.engine.shared import Shared
from pg_claimcheck.engine.supervisor import MAX_REPLACEMENTS, TICK_S, Supervisor, check_headroom, drained
from pg_claimcheck.engine.watch import RunWatch
from pg_claimcheck.engine.worker import BARRIER_TIMEOUT_S, WorkerPlan, worker_main
from pg_claimcheck.errors import ClaimcheckError, Interrupted, ServerError, UsageError
from pg_claimcheck.server import children, interrupts
from pg_claimcheck.server.interrupts import shielded
from pg_claimcheck.server.provision import Server
from pg_claimcheck.server.runcontext import RunContext
from pg_claimcheck.server.schema import SeededJobs, build_jobs_table, build_own_tables, key_base
from pg_claimcheck.settings import RunSettings, StopReason
from pg_claimcheck.verdict.ledger import WorkerLog
from pg_claimcheck.verdict.observed import WorkerTelemetry
from pg_claimcheck.verdict.result import RunResult

JOIN_TIMEOUT_S = 10.0
STOP_GRACE_S = 5.0
"""After a stop at a time limit (the budget, --duration, a condition's cap), the time a worker has to
end the statement it was in, besides its work time: one still in it then is stuck, and its backend is
ended (a claim asleep for an hour would hold the run, and a planner condition, that hour)."""
PROOF_BUSY_S = 1.0
"""At a violation's proof, workers in one statement for this long are ended at once (a claim's or a
completion's usual statement takes milliseconds)."""


def run_strategy(conn: psycopg.Connection, server: Server, run: RunContext, strategy: Strategy,
                 settings: RunSettings, on_progress=None, seeded: SeededJobs | None = None,
                 deadline: float | None = None) -> RunResult:
    """Seed, check, run and judge one strategy x setting. `conn` is the coordinator's, in the run's
    schema; `run` makes every other connection of the run. `seeded`: the tables are built already (a
    planner condition's, see pg_claimcheck.plans). `deadline`: when its share of a check's time budget
    ends (monotonic, pg_claimcheck.engine.budget): the run stops there as at a time cap. What no run
    of the strategy at these settings could do is refused before, once for all of a verb's runs, by its
    use case (pg_claimcheck.app.preflight)."""
    seeded = seeded or seed(conn, run, strategy, settings.jobs)
    shape = validate(run, strategy, seeded.count)
    settings = reaper_for(strategy, shape, settings)
    check_headroom(conn, settings.workers + 2 + (1 if settings.faults else 0) + (1 + settings.producers if settings.rate_per_s else 0),
                   who="workers, the samplers, the reaper, the fault injector and the producer", lower="--workers")
    # The producer's keys are reserved now, after the seeded ones: the watch knows them before any is enqueued.
    feed = None if settings.rate_per_s is None else producing.ProducerPlan(
        run=run, strategy=strategy, rate_per_s=settings.rate_per_s, duration_s=settings.produce_s,
        first_key=seeded.last_id + 1, producers=settings.producers, learns_keys=strategy.own_schema,
        key_is_int=shape.key_is_int, channel=wakeup.channel_name(run.run_id) if settings.wakeup == "notify" else None)
    plan = WorkerPlan(run=run, strategy=strategy, settings=settings, shape=shape, keys=seeded.keys, feed=feed)
    going = _Run(plan, server.restart, on_progress, deadline, RunWatch(seeded.first_id, feed.last_key if feed else seeded.last_id,
                                                             proves=plan.stops_on_proof,
                                                             knows_keys=not (feed and feed.learns_keys)))
    going.go()
    fed = None if feed is None else feedfigures.outcome(feed, going.producer.logs, going.logs, going.telemetry, seeded.keys)
    record = going.record()
    if any(f.kind == "restart" for f in going.faults):
        with run.connect("coordinator") as fresh:  # the restart closed the coordinator's connection too
            return judge_run(record, RunTable(fresh, strategy), strategy, settings, seeded, releases=plan.releases,
                             fed=fed)
    return judge_run(record, RunTable(conn, strategy), strategy, settings, seeded, releases=plan.releases, fed=fed)


class NothingReleases(UsageError):
    """A file's own tables with no `reap` section and a claim returning no `lease_until`: nothing
    would give back a claim whose lease ended (planner conditions report lease-expiry not applicable)."""


def reaper_for(strategy: Strategy, shape: ClaimShape, settings: RunSettings) -> RunSettings:
    """The settings a file's own tables can run: the built-in reaper knows only our jobs table.

    A file without a `reap` section whose claim returns `lease_until` needs no reaper: its claim
    re-takes a job whose lease ended (a visibility timeout, as pgmq's), and the ledger judges that
    re-take by the lease and the server's clock. Such a run goes without one (`reap_every_s` None,
    as the report shows); any other file without a `reap` section is refused.
    """
    if not strategy.own_schema or settings.reap_every_s is None or strategy.has("reap"):
        return settings
    if shape.lease_index is not None:
        return dataclasses.replace(settings, reap_every_s=None)
    raise NothingReleases(f"{strategy.source} brings its own tables: --reap-every and --faults need its own 'reap' "
                     "section (the built-in reaper knows only claimcheck's jobs table), or a claim that returns "
                     "lease_until (a lease its own claim re-takes once it ends, which needs no reaper)")


def check_fail_rate(strategy: Strategy, settings: RunSettings) -> None:
    if settings.fail_rate and not strategy.has("fail"):
        raise UsageError(f"--fail-rate needs a 'fail' section in {strategy.source}")


def validate(run: RunContext, strategy: Strategy, seeded: int | None = None) -> ClaimShape:
    """Check the file on the server, on a connection of its own closed before any worker starts: a
    rollback does not release what a statement takes for the session (an advisory lock, a LISTEN, a
    SET), and a connection that lives through the run must hold none of it."""
    with run.connect("validate") as throwaway:
        return validate_on_server(throwaway, strategy, seeded)


def seed(conn: psycopg.Connection, run: RunContext, strategy: Strategy, jobs: int, while_seeding=None) -> SeededJobs:
    """The run's jobs, the file's own tables or our `jobs`, in the run's schema and key range;
    while_seeding: see build_jobs_table."""
    if strategy.own_schema:
        return build_own_tables(conn, run.schema, strategy, jobs, key_base(run.run_id), while_seeding=while_seeding)
    return build_jobs_table(conn, run.schema, jobs, key_base(run.run_id), while_seeding=while_seeding)


class _Run:
    """The processes, shared memory and background threads of one run."""

    def __init__(self, plan: WorkerPlan, restart, on_progress, deadline: float | None, watch: RunWatch) -> None:
        self.plan, self.settings, self.restart, self.on_progress = plan, plan.settings, restart, on_progress
        self.deadline = deadline
        self.budget_spent_at: float | None = None
        """Seconds into the run at which its share of the budget was spent (it stopped there), or None."""
        self.watch = watch
        """Progress and proven violations, from the records as they arrive."""
        self.no_progress_s: float | None = None
        self.sampler: RunSamplers | None = None
        self.stuck: list[StuckBackend] = []
        """Workers' backends found stuck in one statement when the run was ended for want of progress."""
        self.stuck_after_stop: float | None = None
        """Seconds after a time stop at which `stuck` were found still in their statement, or None."""
        self.coordinator_cpu_s: float | None = None
        """The coordinator's CPU (all its threads: sampler, reaper, progress) from release to the end."""
        # fork: workers start in milliseconds. No thread of ours runs when the first ones are forked
        # (the previous run's sampler has been joined); replacements may be forked while the
        # sampler and reaper threads run, which is safe because the child only opens a new connection.
        self.ctx = multiprocessing.get_context("fork")
        slots = self.settings.workers + MAX_REPLACEMENTS
        self.shared = Shared.forked(self.ctx, slots, producers=plan.feed.producers if plan.feed else 0)
        self.producer: producing.Producers | None = None
        self.processes: dict[int, multiprocessing.Process] = {}
        self.receivers: dict[int, multiprocessing.connection.Connection] = {}
        # One selector for the whole run: building one per wait (multiprocessing.connection.wait)
        # costs more CPU than the messages themselves.
        self.selector = selectors.DefaultSelector()
        self.logs_by_worker: dict[int, WorkerLog] = {}
        """The coordinator's copy of each worker's log, merged from what it streams."""
        self.telemetry_by_worker: dict[int, WorkerTelemetry] = {}
        """Each worker's telemetry, from its last message (or what its death says)."""
        self.finished: set[int] = set()
        """Workers whose log is complete: their `end` message arrived, or they died."""
        self.killed: set[int] = set()
        self.reaps: list = []
        self.faults: list[FaultEvent] = []
        self.faults_skipped: list[str] = []
        self.stalled: dict[int, int] = {}
        """The job each stalled worker slept on (pg_claimcheck.engine.faults.FaultInjector.stalled)."""
        self.waits = WaitSamples()
        self.stopped_by = self.settings.limit_kind

    def stop_reason(self, started: float) -> str | None:
        """Why the run ended before its drain, in words, for the report."""
        if self.stopped_by == StopReason.VIOLATION:
            return f"{self.watch.proof} at +{self.watch.proof_at - started:.2f}s"
        if self.stopped_by == StopReason.NO_PROGRESS and self.stuck and self.stuck_after_stop is not None:
            others = f"; {len(self.stuck) - 1} more worker(s) with it" if len(self.stuck) > 1 else ""
            return (f"the run's time was up, but {self.stuck_after_stop:.0f}s later {self.stuck[0]}{others}; "
                    "its backend was terminated to end the run")
        if self.stopped_by == StopReason.NO_PROGRESS and self.stuck:
            others = f"; {len(self.stuck) - 1} more worker(s) stuck with it" if len(self.stuck) > 1 else ""
            return (f"no job was finished for {self.no_progress_s:.0f}s: {self.stuck[0]}{others}; "
                    "its backend was terminated to end the run")
        if self.stopped_by == StopReason.NO_PROGRESS:
            return (f"workers kept claiming but no job was finished for {self.no_progress_s:.0f}s: the claim "
                    "hands out jobs it does not take, or `complete` never changes a row")
        if self.stopped_by == StopReason.DURATION and self.budget_spent_at is not None:
            return (f"its share of the check's time budget was spent at +{self.budget_spent_at:.1f}s (--budget); "
                    "jobs not reached are not lost")
        if self.stopped_by == StopReason.STALLED and self.no_progress_s is not None:
            return f"no claim was committed for {self.no_progress_s:.0f}s"
        return None

    @property
    def logs(self) -> list[WorkerLog]:
        return [self.logs_by_worker[i] for i in sorted(self.finished)]

    @property
    def telemetry(self) -> list[WorkerTelemetry]:
        """The finished workers' telemetry, in the order of `logs`."""
        return [self.telemetry_by_worker[i] for i in sorted(self.finished)]

    def record(self) -> RunRecord:
        """What the run did, for judge_run."""
        record = RunRecord.of(self.logs, self.telemetry, self.stopped_by, drained(self.stopped_by, self.settings), killed=self.killed,
                              reaps=self.reaps, faults=self.faults, faults_skipped=self.faults_skipped,
                              waits=self.waits, coordinator_cpu_s=self.coordinator_cpu_s,
                              stalled=self.stalled)
        record.stop_reason = self.stop_reason(record.origin)
        if self.plan.feed is not None and self.sampler is not None:
            record.over_time = feedfigures.rate_over_time(record.logs, record.origin, self.sampler.queue, self.plan.feed,
                                                          self.producer.started_at)
        return record

    def _spawn(self, index: int, barrier) -> None:
        receiver, sender = self.ctx.Pipe(duplex=False)
        process = self.ctx.Process(target=worker_main, args=(self.plan, index, barrier, self.shared, sender),
                                   name=f"claimcheck-w{index:02d}", daemon=True)
        # A Ctrl-C mid-fork would leave a half-started child untracked (or be swallowed by an at-fork
        # hook): it is held until the worker is started and registered, then raised.
        with interrupts.deferred():
            process.start()
            sender.close()
            self.processes[index], self.receivers[index] = process, receiver
            self.selector.register(receiver, selectors.EVENT_READ, data=index)
            self.logs_by_worker[index] = WorkerLog(worker=index)
            self.telemetry_by_worker[index] = WorkerTelemetry(worker=index)

    def _spawn_replacement(self) -> int:
        index = len(self.processes)
        if index >= self.settings.workers + MAX_REPLACEMENTS:
            raise ClaimcheckError("too many replacement workers")
        self._spawn(index, None)
        return index

    def go(self) -> None:
        settings = self.settings
        barrier = self.ctx.Barrier(settings.workers + 1 + (self.plan.feed.producers if self.plan.feed else 0))
        sampler = reaper = None
        done = False
        try:
            # Connected before any worker: a refused connection is then a worker's, reported as such.
            # The queue sampler reads our jobs table: a file's own fed tables are not sampled (docs/producers.md).
            feed = self.plan.feed if self.plan.feed is not None and not self.plan.feed.learns_keys else None
            sampler = self.sampler = RunSamplers(self.plan.run, feed and feed.duration_s)
            sampler.start()
            for index in range(settings.workers):
                self._spawn(index, barrier)
            if self.plan.feed is not None:
                with interrupts.deferred():  # registered before a Ctrl-C is raised, as _spawn's workers
                    self.producer = producing.Producers(self.ctx, self.plan.feed, barrier, self.shared)
            try:
                barrier.wait(BARRIER_TIMEOUT_S)
            except threading.BrokenBarrierError:
                self._drain_messages(deadline=time.monotonic() + JOIN_TIMEOUT_S)
                if self.producer is not None and self.producer.receive(JOIN_TIMEOUT_S) and self.producer.error:
                    raise ServerError(f"the run could not start: {self.producer.error}") from None
                errors = [t.error for t in self.telemetry if t.error]
                raise ServerError("workers could not start: " + (errors[0] if errors else
                                  "they did not reach the start barrier")) from None
            started, cpu_started = time.monotonic(), time.process_time()
            if settings.reap_every_s is not None:
                reaper = Reaper(self.plan.run, self.plan.strategy, settings.reap_every_s, self.plan.keys)
                reaper.start()
            injector = FaultInjector(settings.faults, settings.jobs, self.plan.run, started,
                                     self.restart) if settings.faults else None
            if injector is not None:
                injector.arm(list(self.processes), self.shared)
            self._monitor(started, injector)
            if self.producer is not None:
                self.producer.receive(JOIN_TIMEOUT_S)
            if not self.shared.stop.value and any(t.drained for t in self.telemetry):
                self.stopped_by = StopReason.DRAINED  # before its --duration or --claims-per-worker
            self.coordinator_cpu_s = time.process_time() - cpu_started
            self.waits = sampler.stop(last=True)  # and one sample of a rate run's drained queue
            sampler = None
            if reaper is not None:
                self.reaps = reaper.stop()
                reaper = None
            if injector is not None:
                injector.observe(self.shared, last=True)
                self.faults, self.faults_skipped = injector.events, injector.skipped + injector.kinds
                self.stalled = injector.stalled
            errors = [t.error for t in self.telemetry if t.error]
            if errors:
                raise ClaimcheckError(f"a worker failed mid-run, so the run is not judged: {errors[0]}")
            if self.producer is not None and self.producer.error:
                raise ClaimcheckError(f"{self.producer.error}; the run is not judged without its producer")
            done = True
        except KeyboardInterrupt:
            raise Interrupted("interrupted: workers stopped before the run finished") from None
        finally:
            for thread in (sampler, reaper):
                if thread is not None:
                    thread.stop()
            with shielded():  # a second Ctrl-C must not leave workers behind
                _reap(list(self.processes.values()) + (self.producer.processes if self.producer else []),
                      graceful=done)
            self.selector.close()
            if self.producer is not None:
                self.producer.close()
            for receiver in self.receivers.values():
                receiver.close()

    def _monitor(self, started: float, injector: FaultInjector | None) -> None:
        settings = self.settings
        # A stalled worker sleeps past its lease before anyone may take its job again.
        supervisor = Supervisor(settings, started, extra_stall_s=settings.lease_seconds * (
            settings.faults.stall_factor + 2) if settings.faults else 0.0, deadline=self.deadline)
        next_tick, stopped_at, grace_over = started, 0.0, False
        grace_s = STOP_GRACE_S + max(settings.work.a_ms, settings.work.b_ms) / 1000
        while len(self.finished) < len(self.processes):
            # Workers' messages are taken as they come; everything else (progress, faults, limits)
            # runs once per TICK_S, so the coordinator stays off the CPU the server needs. The drain
            # ends at the tick even while messages keep coming: on a busy machine 16 workers always
            # had one ready, and the tick (faults, the budget, the stall limits) never came.
            self._drain_messages(deadline=next_tick)
            if self.watch.proof is not None and not self.shared.stop.value:
                # Proven from a prefix of the run: nothing recorded later can undo it (see pg_claimcheck.engine.watch).
                self.shared.stop.value, self.stopped_by = 1, StopReason.VIOLATION
                # A proof is final: a worker that has been in one statement for a while (a claim of a
                # million rows on its way) is ended now, not after the grace a time limit gives it.
                # Its claim had not committed: rolled back, it is no claim.
                self._end_stuck_after_stop(PROOF_BUSY_S)
            now = time.monotonic()
            if now < next_tick:
                continue
            next_tick = now + TICK_S
            claims = self.shared.claimed()
            supervisor.saw(now, claims, self.watch.progress)
            if self.on_progress:
                self.on_progress(claims, now - started)
            if self.producer is not None:
                self.producer.watch()
            # Every fault whose mark has passed, not one per tick: a fast run can pass several marks
            # in one tick and drain before the next (lock mode lost its restart that way).
            if injector is not None:
                injector.observe(self.shared)
            while injector is not None and injector.due(claims) and not self.shared.stop.value:
                alive = {i: p.pid for i, p in self.processes.items() if i not in self.finished and p.is_alive()}
                injector.inject(alive, self.shared.stall, self._spawn_replacement)
                self.killed |= injector.killed
                supervisor.excuse(time.monotonic())
            if self.shared.producing.value:  # a slow --rate's idle queue is no stall; the producer ends in time
                supervisor.excuse(now)
            limit = None if self.shared.stop.value else supervisor.limit(now)
            if limit == "duration":
                self.shared.stop.value = 1  # stopped_by is the settings' limit_kind already
            elif limit in (StopReason.TIME_CAP, StopReason.BUDGET):
                self.shared.stop.value, self.stopped_by = 1, StopReason.DURATION
                if limit == StopReason.BUDGET:
                    self.budget_spent_at = now - started
            elif limit is not None:
                self._halt_without_progress(limit, supervisor.since_progress(now), supervisor.stall_limit_s)
            if self.shared.stop.value:
                stopped_at = stopped_at or now
                if not grace_over and now - stopped_at > grace_s:
                    grace_over = True
                    self._end_stuck_after_stop(now - stopped_at)
                if now - stopped_at > JOIN_TIMEOUT_S + settings.lease_seconds:
                    # A worker that ignores the stop (stuck in a statement) is ended, and its
                    # death reported: the run cannot be judged without it.
                    for index, process in self.processes.items():
                        if index not in self.finished and process.is_alive():
                            process.terminate()

    def _halt_without_progress(self, kind: str, since_progress: float, limit: float) -> None:
        """No claim (`kind` `stalled`) or no finished job (`no-progress`) for `limit` seconds (the
        supervisor's limit): stop. A worker
        stuck in one statement all that time (pg_sleep, a lock never released, a `complete` that never
        returns) makes it `no-progress`, a failure, naming the worker; its backend is ended, or the
        run would wait for the statement (an hour, or forever) and the workers blocked behind it."""
        self.shared.stop.value = 1
        self.stuck = self._end_stuck(limit)
        if self.stuck or kind == "no-progress":
            self.stopped_by, self.no_progress_s = StopReason.NO_PROGRESS, since_progress
        else:
            self.stopped_by, self.no_progress_s = StopReason.STALLED, limit

    def _end_stuck_after_stop(self, since_stop: float) -> None:
        """Workers still in the statement they were in when the run stopped, `since_stop` seconds ago:
        their backends are ended (a stopped worker does not reconnect). A run stopped at its time limit
        is then `no-progress` naming them (a liveness failure, pg_claimcheck.verdict.liveness)."""
        if len(self.finished) >= len(self.processes):
            return
        stuck = self._end_stuck(since_stop)
        if stuck and self.stopped_by in (StopReason.DURATION, StopReason.CLAIMS_PER_WORKER):
            self.stuck, self.stuck_after_stop, self.stopped_by = stuck, since_stop, StopReason.NO_PROGRESS

    def _end_stuck(self, at_least_s: float) -> list[StuckBackend]:
        """The run's workers in one statement for at least `at_least_s`, their backends ended (a stopped
        worker does not reconnect): the only way the coordinator ends a busy backend."""
        stuck: list[StuckBackend] = []
        try:
            with self.plan.run.connect("monitor", in_schema=False) as conn:
                stuck = stuck_backends(conn, self.plan.run, at_least_s)
                for backend in stuck:
                    conn.execute(QUERIES["terminate_backend"], {"pid": backend.pid})
        except psycopg.Error:
            pass  # unseen, or not ended: stuck workers' processes are terminated after JOIN_TIMEOUT_S (_monitor)
        return stuck

    def _drain_messages(self, deadline: float) -> None:
        """Receive what workers sent until `deadline` (monotonic): waits until then for a first
        message, and returns once it has passed, having taken at least one ready batch, however
        many messages are still waiting. A worker's log is finished by its `end` message or its death."""
        while self.selector.get_map():
            ready = self.selector.select(max(0.0, deadline - time.monotonic()))
            if not ready:
                return
            for key, _ in ready:
                index = key.data
                try:
                    message = receive(self.receivers[index])
                except (EOFError, OSError):
                    self._died(index)
                    continue
                log = self.logs_by_worker[index]
                if isinstance(message, LogDelta):
                    first_new = len(log)
                    self.watch.see(log, first_new, message.merge_into(log))
                else:
                    apply_summary(self.telemetry_by_worker[index], message)
                    self._finish(index)
            if time.monotonic() >= deadline:
                return

    def _finish(self, index: int) -> None:
        self.finished.add(index)
        self.selector.unregister(self.receivers[index])
        self.receivers[index].close()

    def _died(self, index: int) -> None:
        """A worker gone without its `end` message: killed by a fault (expected), or crashed."""
        telemetry = self.telemetry_by_worker[index]
        telemetry.finished_at = time.monotonic()
        if index not in self.killed:
            telemetry.error = f"worker {index} died without a word (exit code {self.processes[index].exitcode})"
        self._finish(index)


def _reap(processes: list, graceful: bool) -> None:
    """Leave no worker behind, whatever happened. Finished workers get time to exit on their own."""
    if graceful:
        children.wait(processes, JOIN_TIMEOUT_S)
    children.stop(processes, within_s=JOIN_TIMEOUT_S)
