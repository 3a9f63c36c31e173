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

from claimcheck.contract.limit import claim_limit
from claimcheck.errors import ClaimcheckError, Interrupted, ServerError, UsageError
from claimcheck.server import interrupts
from claimcheck.server.interrupts import shielded
from claimcheck.engine.faults import FaultEvent, FaultInjector, fates
from claimcheck.engine import feedfigures, fedkeys, idle, producer as producing
from claimcheck.verdict.ledger import Verdict, WorkerLog, judge
from claimcheck.engine.logstream import apply_summary, merge_delta
from claimcheck.server.provision import Server
from claimcheck.contract.queries import QUERIES
from claimcheck.engine.reaper import Reaper
from claimcheck.verdict.result import RunResult, TableOutcome
from claimcheck.engine.sampler import LockWaitSampler, StuckBackend, stuck_backends, WaitSamples
from claimcheck.server.runcontext import RunContext
from claimcheck.server.schema import SeededJobs, build_jobs_table, build_own_tables, key_base
from claimcheck.settings import MAX_FAULTS, RunSettings
from claimcheck.verdict.stats import latency_summary
from claimcheck.contract.strategy import ClaimShape, Strategy, execute_section, validate_on_server
from claimcheck.report.timeline import claims_over_time
from claimcheck.engine.watch import RunWatch
from claimcheck.engine.worker import BARRIER_TIMEOUT_S, Shared, WorkerPlan, worker_main

MONITOR_INTERVAL_S = 0.1
STALL_TIMEOUT_S = 30.0
"""No claim by any worker for this long (plus the time a batch of work may take) ends a run
(`stalled`); claims that go on while no job is finished for as long end it too (`no-progress`)."""
JOIN_TIMEOUT_S = 10.0
MAX_REPLACEMENTS = MAX_FAULTS
"""Replacement workers a run may start: one per kill fault, of which a run has at most MAX_FAULTS."""


def run_strategy(conn: psycopg.Connection, server: Server, schema: str, run_id: str, strategy: Strategy,
                 settings: RunSettings, on_progress=None, seeded: SeededJobs | None = None) -> RunResult:
    """Seed, check, run and judge one strategy x setting. `conn` is the coordinator's, in `schema`.
    `seeded`: the tables are built already (a planner condition's, see claimcheck.plans)."""
    check_fail_rate(strategy, settings)
    producing.check_feedable(strategy, settings)
    idle.check_wakeup(strategy, settings, RunContext(server.dsn, run_id).stateless(worker=True))
    seeded = seeded or seed(conn, schema, run_id, strategy, settings.jobs)
    shape = validate(server.dsn, run_id, schema, strategy, seeded.count)
    settings = reaper_for(strategy, shape, settings)
    _check_headroom(conn, settings.workers + (1 if settings.faults else 0) + (settings.producers if settings.rate_per_s else 0))
    context = RunContext(server.dsn, run_id)
    # The producer's keys are reserved now, after the seeded ones: the watch knows them before any is enqueued.
    feed = None if settings.rate_per_s is None else producing.ProducerPlan(
        run=context, strategy=strategy, rate_per_s=settings.rate_per_s, duration_s=settings.produce_s,
        first_key=seeded.last_id + 1, producers=settings.producers, learns_keys=strategy.own_schema,
        key_is_int=shape.key_is_int, channel=idle.channel_name(run_id) if settings.wakeup == "notify" else None)
    plan = WorkerPlan(run=context, strategy=strategy, settings=settings, shape=shape, keys=seeded.keys, feed=feed)
    run = _Run(plan, server.restart, on_progress, RunWatch(seeded.first_id, feed.last_key if feed else seeded.last_id,
                                                           proves=plan.stops_on_proof,
                                                           knows_keys=not (feed and feed.learns_keys)))
    run.go()
    fed = None if feed is None else feedfigures.outcome(feed, run.producer.logs, run.logs, seeded.keys)
    if any(f.kind == "restart" for f in run.faults):
        with coordinator_connection(server.dsn, run_id, schema) as fresh:  # the restart closed the coordinator's connection too
            return judge_run(fresh, run, strategy, settings, seeded, releases=plan.releases, fed=fed)
    return judge_run(conn, run, strategy, settings, seeded, releases=plan.releases, fed=fed)


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
    raise UsageError(f"{strategy.source} brings its own tables: --reap-every and --faults need its own 'reap' "
                     "section (the built-in reaper knows only claimcheck's jobs table), or a claim that returns "
                     "lease_until (a lease its own claim re-takes once it ends, which needs no reaper)")


def check_fail_rate(strategy: Strategy, settings: RunSettings) -> None:
    if settings.fail_rate and not strategy.has("fail"):
        raise UsageError(f"--fail-rate needs a 'fail' section in {strategy.source}")


def validate(dsn: str, run_id: str, schema: str, strategy: Strategy, seeded: int | None = None) -> ClaimShape:
    """Check the file on the server, on a connection of its own closed before any worker starts: a
    rollback does not release what a statement takes for the session (an advisory lock, a LISTEN, a
    SET), and a connection that lives through the run must hold none of it."""
    with coordinator_connection(dsn, run_id, schema, role="validate") as throwaway:
        return validate_on_server(throwaway, strategy, seeded)


def seed(conn: psycopg.Connection, schema: str, run_id: str, strategy: Strategy, jobs: int, while_seeding=None) -> SeededJobs:
    """The run's jobs, the file's own tables or our `jobs`, in the run's key range; while_seeding: see build_jobs_table."""
    if strategy.own_schema:
        return build_own_tables(conn, schema, strategy, jobs, key_base(run_id), while_seeding=while_seeding)
    return build_jobs_table(conn, schema, jobs, key_base(run_id), while_seeding=while_seeding)


def _table_outcome(conn: psycopg.Connection, strategy: Strategy, seeded: SeededJobs,
                   logs: list[WorkerLog]) -> TableOutcome:
    if not strategy.own_schema:
        return TableOutcome(*conn.execute(QUERIES["table_outcome"]).fetchone(),
                            *conn.execute(QUERIES["lifecycle_outcome"]).fetchone()[1:])
    # Own tables: the file's `remaining` says how many jobs are unfinished; the rest are done.
    with conn.transaction():
        left = execute_section(conn, strategy, "remaining", {}).fetchone()[0]
    attempts = max((max(log.attempt) for log in logs if len(log)), default=0)
    return TableOutcome(done=seeded.count - left, queued=left, running=0, failed=0, max_attempts=attempts)


def run_span(logs: list[WorkerLog]) -> tuple[float, float]:
    """The run's span, on the workers' own clocks: from the first release from the barrier (the
    coordinator wakes from it a little later than they do) to the last claim or end of a job, or to
    the last worker's end if none claimed a job. After the last job, the workers only find the queue
    empty (an empty claim, the drain check, a poll pause, each again while a job is still locked by
    another), which is no work on jobs: at 16 workers in lock mode that was about 90 ms of a 3 s run.
    The library runner's span ends at its last job too; pgbench's (the parity benchmark's reference)
    at its last transaction. A requeue ends at its release time, before its `fail` was first sent
    (see Loop._finish_resiliently): a run whose last event is a requeue retried through a reconnect
    ends before that retry."""
    started = min(log.started_at for log in logs if log.started_at)
    last = [log.last_event() for log in logs if len(log)]
    return started, max(last) if last else max(log.finished_at for log in logs)


def judge_run(conn: psycopg.Connection, run: "_Run", strategy: Strategy, settings: RunSettings,
              seeded: SeededJobs, *, releases: bool, unreaped: bool = False,
              fed: feedfigures.ProducerOutcome | None = None) -> RunResult:
    """Judge a finished run from its workers' logs and the table (the fork driver's and the Locust
    master's). `releases`: see WorkerPlan.releases; `unreaped`: no reaper returns a dead claimer's
    jobs (see _unrecorded); `fed`: the producer's figures, in a run with --rate."""
    logs = run.logs
    if fed is not None:  # the seeded jobs and exactly those the producers committed (claimcheck.engine.fedkeys)
        seeded, logs = fedkeys.judged(seeded, fed.committed, logs)
    outcome = _table_outcome(conn, strategy, seeded, logs)
    started, finished = run_span(logs)
    # A run ended early (a proven violation, no progress, its time or claim limit) did not drain:
    # its unclaimed jobs are not lost. One whose queue drained before its limit did.
    drained = run.stopped_by == "drained" or (settings.drains and run.stopped_by == "stalled")
    verdict = judge(logs, seeded.first_id, seeded.last_id, drained=drained, origin=started, reaps=run.reaps,
                    releases=releases, keys=seeded.keys, limit=claim_limit(strategy.statements, settings.batch).rows)
    if run.killed and verdict.unclaimed_jobs and not strategy.own_schema:
        verdict = _unrecorded(conn, verdict, logs, seeded, unreaped)
    if run.faults:
        stalled = {e.worker: run.shared.stalled_job[e.worker] for e in run.faults
                   if e.kind == "stall" and run.shared.stall[e.worker] == 2}
        # A file's own tables have no status column we know of: the jobs' final state shows as '?'.
        fates(run.faults, logs, stalled, started, (lambda ids: {}) if strategy.own_schema else lambda ids: {
            r[0]: (r[1], r[2]) for r in conn.execute(QUERIES["jobs_state"], {"ids": sorted(ids)}).fetchall()})
    return RunResult(
        strategy=strategy, settings=settings, seeded=seeded, verdict=verdict, waits=run.waits, table=outcome,
        elapsed_s=finished - started, stopped_by=run.stopped_by,
        claim_latency_ms=latency_summary(x for log in logs for x in log.claim_latency_ms),
        serialization_failures=sum(log.serialization_failures for log in logs),
        deadlocks=sum(log.deadlocks for log in logs),
        claim_statements=sum(log.claim_statements for log in logs),
        empty_claims=sum(log.empty_claims for log in logs), faults_skipped=run.faults_skipped,
        reconnects=sum(log.reconnects for log in logs), reaped=len(run.reaps), faults=run.faults,
        claim_errors=_sum_counts(log.sqlstates for log in logs),
        # Over the workers' whole time, past the last job: a stall or a slow end shows as empty buckets.
        claims_over_time=claims_over_time(logs, started, max(log.finished_at for log in logs) - started),
        stop_reason=run.stop_reason(started),
        cpu_s=cpu_use(logs, run.coordinator_cpu_s), producer=fed,
    )


def cpu_use(logs: list[WorkerLog], coordinator_s: float | None) -> dict:
    """The harness's own CPU in the run: its workers' (summed) and its coordinator's, in seconds.
    Against pgbench's CPU on the same SQL it says what our client costs (see claimcheck.engine.pgbench)."""
    used = [log.cpu_s for log in logs if log.cpu_s is not None]
    return {"workers": round(sum(used), 4) if used else None,
            "coordinator": None if coordinator_s is None else round(coordinator_s, 4)}


def _unrecorded(conn: psycopg.Connection, verdict: Verdict, logs: list[WorkerLog], seeded: SeededJobs,
                unreaped: bool) -> Verdict:
    """A worker killed between a commit and its next flush takes that claim's record with it. Jobs
    the table shows finished but no log claimed were claimed by such a worker: not lost. Without a
    reaper to return the others (`unreaped`: a Locust run), a job the table shows taken but
    unfinished was claimed by one too."""
    claimed = {job for log in logs for job in log.job}
    never = [job for job in range(seeded.first_id, seeded.last_id + 1) if job not in claimed]
    finished = conn.execute(QUERIES["finished_among"], {"ids": never}).fetchone()[0]
    taken = conn.execute(QUERIES["claimed_among"], {"ids": never}).fetchone()[0] if unreaped else finished
    return dataclasses.replace(verdict, unclaimed_jobs=verdict.unclaimed_jobs - taken, unrecorded_claims=taken,
                               jobs_finished=verdict.jobs_finished + finished)


def _sum_counts(counts) -> dict[str, int]:
    total: dict[str, int] = {}
    for c in counts:
        for k, v in c.items():
            total[k] = total.get(k, 0) + v
    return dict(sorted(total.items()))


def coordinator_connection(dsn: str, run_id: str, schema: str | None = None,
                           role: str = "coordinator") -> psycopg.Connection:
    """The coordinator's connection (or a short-lived one for `role`), named for the run, in the
    run's schema once it exists."""
    return RunContext(dsn, run_id).connect(role, in_schema=schema is not None)


def _check_headroom(conn: psycopg.Connection, workers: int) -> None:
    free = conn.execute(QUERIES["connection_headroom"]).fetchone()[0]
    if free < workers + 2:
        raise ServerError(f"the server has room for {free} more connections but the run needs {workers + 2} "
                          "(workers, the sampler, the reaper and the fault injector); lower --workers or raise "
                          "max_connections (or the role's or database's CONNECTION LIMIT, which count too)")


class _Run:
    """The processes, shared memory and background threads of one run."""

    def __init__(self, plan: WorkerPlan, restart, on_progress, watch: RunWatch) -> None:
        self.plan, self.settings, self.restart, self.on_progress = plan, plan.settings, restart, on_progress
        self.watch = watch
        """Progress and proven violations, from the records as they arrive."""
        self.no_progress_s: float | None = None
        self.sampler: LockWaitSampler | None = None
        self.stuck: list[StuckBackend] = []
        """Workers' backends found stuck in one statement when the run was ended for want of progress."""
        self.coordinator_cpu_s: float | None = None
        """The coordinator's CPU (all its threads: sampler, reaper, progress) from release to the end."""
        # fork: workers start in milliseconds. No thread of ours runs when the first ones are forked
        # (the previous run's sampler has been joined); replacements may be forked while the
        # sampler and reaper threads run, which is safe because the child only opens a new connection.
        self.ctx = multiprocessing.get_context("fork")
        slots = self.settings.workers + MAX_REPLACEMENTS
        self.shared = Shared(stop=self.ctx.Value("b", 0, lock=False),
                             progress=self.ctx.Array("q", slots, lock=False),
                             stall=self.ctx.Array("b", slots, lock=False),
                             stalled_job=self.ctx.Array("q", slots, lock=False),
                             producing=producing.Producing(self.ctx, plan.feed.producers if plan.feed else 0),
                             feed_start=self.ctx.Value("d", float("nan"), lock=False))
        self.producer: producing.Producers | None = None
        self.processes: dict[int, multiprocessing.Process] = {}
        self.receivers: dict[int, multiprocessing.connection.Connection] = {}
        # One selector for the whole run: building one per wait (multiprocessing.connection.wait)
        # costs more CPU than the messages themselves.
        self.selector = selectors.DefaultSelector()
        self.logs_by_worker: dict[int, WorkerLog] = {}
        """The coordinator's copy of each worker's log, merged from what it streams."""
        self.finished: set[int] = set()
        """Workers whose log is complete: their `end` message arrived, or they died."""
        self.killed: set[int] = set()
        self.reaps: list = []
        self.faults: list[FaultEvent] = []
        self.faults_skipped: list[str] = []
        self.waits = WaitSamples()
        self.stopped_by = self.settings.limit_kind

    def stop_reason(self, started: float) -> str | None:
        """Why the run ended before its drain, in words, for the report."""
        if self.stopped_by == "violation":
            return f"{self.watch.proof} at +{self.watch.proof_at - started:.2f}s"
        if self.stopped_by == "no-progress" and self.stuck:
            others = f"; {len(self.stuck) - 1} more worker(s) stuck with it" if len(self.stuck) > 1 else ""
            return (f"no job was finished for {self.no_progress_s:.0f}s: {self.stuck[0]}{others}; "
                    "its backend was terminated to end the run")
        if self.stopped_by == "no-progress":
            return (f"workers kept claiming but no job was finished for {self.no_progress_s:.0f}s: the claim "
                    "hands out jobs it does not take, or `complete` never changes a row")
        return None

    @property
    def logs(self) -> list[WorkerLog]:
        return [self.logs_by_worker[i] for i in sorted(self.finished)]

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
            sampler = self.sampler = LockWaitSampler(self.plan.run)
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
                errors = [log.error for log in self.logs if log.error]
                raise ServerError("workers could not start: " + (errors[0] if errors else
                                  "they did not reach the start barrier")) from None
            started, cpu_started = time.monotonic(), time.process_time()
            if settings.reap_every_s is not None:
                reaper = Reaper(self.plan.run, self.plan.strategy, settings.reap_every_s, self.plan.keys)
                reaper.start()
            injector = FaultInjector(settings.faults, settings.jobs, self.plan.run, started,
                                     self.restart) if settings.faults else None
            self._monitor(started, injector)
            if self.producer is not None:
                self.producer.receive(JOIN_TIMEOUT_S)
            if not self.shared.stop.value and any(log.drained for log in self.logs):
                self.stopped_by = "drained"  # before its --duration or --claims-per-worker
            self.coordinator_cpu_s = time.process_time() - cpu_started
            self.waits = sampler.stop()
            sampler = None
            if reaper is not None:
                self.reaps = reaper.stop()
                reaper = None
            if injector is not None:
                self.faults, self.faults_skipped = injector.events, injector.skipped + injector.kinds
            errors = [log.error for log in self.logs if log.error]
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
        stall_limit = settings.stall_limit_s(STALL_TIMEOUT_S)
        if settings.faults:
            stall_limit += settings.lease_seconds * (settings.faults.stall_factor + 2)
        last_claims, last_change = -1, started
        last_progress, last_progress_at = 0, started
        next_tick, stopped_at = started, 0.0
        while len(self.finished) < len(self.processes):
            # Workers' messages are taken as they come; everything else (progress, faults, limits)
            # runs once per MONITOR_INTERVAL_S, so the coordinator stays off the CPU the server needs.
            self._drain_messages(timeout=max(0.0, next_tick - time.monotonic()))
            if self.watch.proof is not None and not self.shared.stop.value:
                # Proven from a prefix of the run: nothing recorded later can undo it (see claimcheck.engine.watch).
                self.shared.stop.value, self.stopped_by = 1, "violation"
            now = time.monotonic()
            if now < next_tick:
                continue
            next_tick = now + MONITOR_INTERVAL_S
            claims = sum(self.shared.progress)
            if claims != last_claims:
                last_claims, last_change = claims, now
            if self.watch.progress != last_progress:
                last_progress, last_progress_at = self.watch.progress, now
            if self.on_progress:
                self.on_progress(claims, now - started)
            if self.producer is not None:
                self.producer.watch()
            # Every fault whose mark has passed, not one per tick: a fast run can pass several marks
            # in one tick and drain before the next (lock mode lost its restart that way).
            while injector is not None and injector.due(claims) and not self.shared.stop.value:
                alive = {i: p.pid for i, p in self.processes.items() if i not in self.finished and p.is_alive()}
                injector.inject(alive, self.shared, self._spawn_replacement)
                self.killed |= injector.killed
                last_change = last_progress_at = time.monotonic()
            if self.shared.stop.value:
                pass
            elif settings.duration_s is not None and now - started >= settings.duration_s:
                self.shared.stop.value = 1
            elif settings.time_cap_s is not None and now - started >= settings.time_cap_s:
                self.shared.stop.value, self.stopped_by = 1, "duration"
            elif self.shared.producing.value:  # a slow --rate's idle queue is no stall; the producer ends in time
                last_change = last_progress_at = now
            elif now - last_change > stall_limit or now - last_progress_at > stall_limit:
                self._halt_without_progress(now - last_change, now - last_progress_at, stall_limit)
            if self.shared.stop.value:
                stopped_at = stopped_at or now
                if now - stopped_at > JOIN_TIMEOUT_S + settings.lease_seconds:
                    # A worker that ignores the stop (stuck in a statement) is ended, and its
                    # death reported: the run cannot be judged without it.
                    for index, process in self.processes.items():
                        if index not in self.finished and process.is_alive():
                            process.terminate()

    def _halt_without_progress(self, since_claim: float, since_progress: float, limit: float) -> None:
        """No claim (`stalled`) or no finished job (`no-progress`) for `limit` seconds: stop. A worker
        stuck in one statement all that time (pg_sleep, a lock never released, a `complete` that never
        returns) makes it `no-progress`, a failure, naming the worker; its backend is ended, or the
        run would wait for the statement (an hour, or forever) and the workers blocked behind it."""
        self.shared.stop.value = 1
        try:
            with self.plan.run.connect("monitor", in_schema=False) as conn:
                self.stuck = stuck_backends(conn, self.plan.run, limit)
                for backend in self.stuck:
                    conn.execute(QUERIES["terminate_backend"], {"pid": backend.pid})
        except psycopg.Error:
            pass  # unseen, or not ended: stuck workers' processes are terminated after JOIN_TIMEOUT_S (_monitor)
        if self.stuck or since_claim <= limit:
            self.stopped_by, self.no_progress_s = "no-progress", since_progress
        else:
            self.stopped_by = "stalled"

    def _drain_messages(self, timeout: float = 0.0, deadline: float | None = None) -> None:
        """Receive what workers sent; a worker's log is finished by its `end` message or its death."""
        while self.selector.get_map():
            wait = timeout if deadline is None else max(0.0, deadline - time.monotonic())
            ready = self.selector.select(wait)
            if not ready:
                return
            for key, _ in ready:
                index = key.data
                try:
                    kind, payload = self.receivers[index].recv()
                except (EOFError, OSError):
                    self._died(index)
                    continue
                if kind == "log":
                    log = self.logs_by_worker[index]
                    first_new = len(log)
                    self.watch.see(log, first_new, merge_delta(log, payload))
                else:
                    apply_summary(self.logs_by_worker[index], payload)
                    self._finish(index)
            timeout = 0.0
            if deadline is not None and time.monotonic() >= deadline:
                return

    def _finish(self, index: int) -> None:
        self.finished.add(index)
        self.selector.unregister(self.receivers[index])
        self.receivers[index].close()

    def _died(self, index: int) -> None:
        """A worker gone without its `end` message: killed by a fault (expected), or crashed."""
        log = self.logs_by_worker[index]
        log.finished_at = time.monotonic()
        if index not in self.killed:
            log.error = f"worker {index} died without a word (exit code {self.processes[index].exitcode})"
        self._finish(index)


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
