"""One run record, one judge: what a coordinator saw of a run, and the RunResult made of it.

Every coordinator (the fork driver, the library runner, the Locust master) ends a run the same
way: it fills a :class:`RunRecord` with what it saw (the claimers' merged logs and their telemetry,
why and when the run ended, the faults it injected, the reaper's returns, the lock waits) and hands it
to :func:`judge_run` with the run's table (a :class:`JobTable`: ours, a file's own, or a library's).
The ledger (pg_claimcheck.verdict.ledger) judges the logs, and only them; the table says what the jobs
became; the telemetry gives the result's figures (latencies, counts, errors, CPU).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal, Protocol

import psycopg

from pg_claimcheck.contract.dialect import placeholders
from pg_claimcheck.contract.limit import claim_limit
from pg_claimcheck.contract.queries import QUERIES
from pg_claimcheck.contract.strategy import Strategy, execute_section
from pg_claimcheck.engine import fedkeys, feedfigures
from pg_claimcheck.engine.faults import FaultEvent, fates
from pg_claimcheck.engine.sampler import WaitSamples
from pg_claimcheck.server.schema import SeededJobs
from pg_claimcheck.settings import Mode, RunSettings, StopReason
from pg_claimcheck.verdict import power
from pg_claimcheck.verdict.ledger import Verdict, WorkerLog, judge
from pg_claimcheck.verdict.liveness import Waiting, settings_to_read
from pg_claimcheck.verdict.observed import WorkerTelemetry
from pg_claimcheck.verdict.result import OverTime, RunResult, TableOutcome
from pg_claimcheck.verdict.stats import latency_summary
from pg_claimcheck.verdict.timeline import claims_over_time


@dataclass
class RunRecord:
    """What a coordinator saw of one finished run. Times are on the claimers' clock (monotonic, or
    the server's for Locust users)."""

    logs: list[WorkerLog]
    """Each claimer's log, complete: merged from its stream, ended by its last message or its death."""
    telemetry: list[WorkerTelemetry]
    """Each claimer's telemetry (in the order of `logs`): from its last message, or what its death says.
    Empty where the claimers measure nothing of theirs (a library's workers)."""
    stopped_by: StopReason
    """Why the run ended (see RunResult.stopped_by)."""
    drained: bool
    """The run went to its end, so a job never claimed is lost (see pg_claimcheck.engine.supervisor.drained)."""
    span: tuple[float, float]
    """From the first release to the last claim or end of a job (see run_span): the run's elapsed time."""
    origin: float
    """Times in the evidence, the fault report and the timeline are seconds after this."""
    observed_s: float
    """How long after `origin` the claimers were watched: the timeline's length."""
    stop_reason: str | None = None
    """Why the run ended before its drain, in words."""
    killed: set[int] = field(default_factory=set)
    """Claimers gone without their last word (killed by a fault, a lost Locust worker process)."""
    reaps: list = field(default_factory=list)
    """The reaper's (or the library's recovery's) returns of expired leases."""
    faults: list[FaultEvent] = field(default_factory=list)
    faults_skipped: list[str] = field(default_factory=list)
    stalled: dict = field(default_factory=dict)
    """Worker -> the job it stalled on, for the stall faults that took hold."""
    waits: WaitSamples = field(default_factory=WaitSamples)
    coordinator_cpu_s: float | None = None
    """The coordinator's CPU from release to the end; None where it is not a run's (Locust's master)."""
    claim_statements: int | None = None
    """Claim statements, where the logs do not count them (a library's executions); None: the logs'."""
    workers_replaced: int = 0
    """Workers that exited on their own and were started again (a library's, see RunResult)."""
    over_time: OverTime | None = None
    """A rate run's queue and pickup latency over time (see pg_claimcheck.engine.feedfigures.rate_over_time)."""

    @classmethod
    def of(cls, logs: list[WorkerLog], telemetry: list[WorkerTelemetry], stopped_by: StopReason, drained: bool,
           **rest) -> RunRecord:
        """A record whose span, origin and timeline come from the claimers themselves (the fork driver's,
        Locust's): the span's start is the origin, the last claimer's end the timeline's end."""
        span = run_span(logs, telemetry)
        observed = max(t.finished_at for t in telemetry) - span[0]
        return cls(logs=logs, telemetry=telemetry, stopped_by=stopped_by, drained=drained, span=span,
                   origin=span[0], observed_s=observed, **rest)


class JobTable(Protocol):
    """What the judge asks of the run's table."""

    def outcome(self, seeded: SeededJobs, logs: list[WorkerLog]) -> TableOutcome:
        """The jobs' state after the run, in our terms."""

    def final_status(self, jobs: set) -> dict:
        """(status, attempts) of each of these jobs, for the fault report; {} where not known."""

    def unrecorded(self, never: list[int]) -> tuple[int, int] | None:
        """(finished, taken) among jobs no log claimed, where the table can tell; else None."""

    def still_queued(self, never: list[int]) -> int | None:
        """How many of the jobs no log claimed are still queued, never taken; None where unknown."""

    def waiting(self) -> Waiting:
        """Jobs queued for a retry not yet due (Waiting() where unknown)."""

    def settings(self, names: list[str]) -> dict:
        """The server's settings of these names, as the run's role sees them."""


class RunTable:
    """The table of a claim run: claimcheck's jobs table, or a file's own tables (which say only how
    many jobs are left, by their `remaining` section)."""

    def __init__(self, conn: psycopg.Connection, strategy: Strategy, *, unreaped: bool = False) -> None:
        self.conn, self.strategy, self.unreaped = conn, strategy, unreaped
        """`unreaped`: no reaper returns a dead claimer's jobs (a Locust run), see judge_run."""

    def outcome(self, seeded: SeededJobs, logs: list[WorkerLog]) -> TableOutcome:
        conn = self.conn
        if not self.strategy.own_schema:
            return TableOutcome(*conn.execute(QUERIES["table_outcome"]).fetchone(),
                                *conn.execute(QUERIES["lifecycle_outcome"]).fetchone()[1:],
                                by_status=tuple(conn.execute(QUERIES["status_counts"]).fetchall()))
        # Own tables: the file's `remaining` says how many are unfinished (statement by statement, as the workers run it).
        left = execute_section(conn, self.strategy, "remaining", {}).fetchone()[0]
        attempts = max((max(log.attempt) for log in logs if len(log)), default=0)
        return TableOutcome(done=seeded.count - left, queued=left, running=0, failed=0, max_attempts=attempts)

    def final_status(self, jobs: set) -> dict:
        if self.strategy.own_schema:  # no status column we know of: the jobs' final state shows as '?'
            return {}
        return {r[0]: (r[1], r[2]) for r in self.conn.execute(QUERIES["jobs_state"], {"ids": sorted(jobs)}).fetchall()}

    def unrecorded(self, never: list[int]) -> tuple[int, int] | None:
        if self.strategy.own_schema:
            return None
        finished = self.conn.execute(QUERIES["finished_among"], {"ids": never}).fetchone()[0]
        taken = self.conn.execute(QUERIES["claimed_among"], {"ids": never}).fetchone()[0] if self.unreaped else finished
        return finished, taken

    def still_queued(self, never: list[int]) -> int | None:
        if self.strategy.own_schema:  # no status we know of: a job no one claimed may be taken and lost
            return None
        return self.conn.execute(QUERIES["still_queued_among"], {"ids": never}).fetchone()[0]

    def waiting(self) -> Waiting:
        if self.strategy.own_schema:
            return Waiting()
        return Waiting(*self.conn.execute(QUERIES["waiting_retries"]).fetchone())

    def settings(self, names: list[str]) -> dict:
        return {name: self.conn.execute(QUERIES["session_setting"], {"name": name}).fetchone()[0] for name in names}


def run_span(logs: list[WorkerLog], telemetry: list[WorkerTelemetry]) -> tuple[float, float]:
    """The run's span, on the workers' own clocks: from the first release from the barrier (the
    coordinator wakes from it a little later than they do) to the last claim or end of a job, or to
    the last worker's end if none claimed a job. After the last job, the workers only find the queue
    empty (an empty claim, the drain check, a poll pause, each again while a job is still locked by
    another), which is no work on jobs: at 16 workers in lock mode that was about 90 ms of a 3 s run.
    The library runner's span ends at its last job too; pgbench's (the parity benchmark's reference)
    at its last transaction. A requeue ends at its release time, before its `fail` was first sent
    (see pg_claimcheck.engine.cycle.LeaseCycle._finish_resiliently): a run whose last event is a requeue retried through a reconnect
    ends before that retry."""
    started = min(t.started_at for t in telemetry if t.started_at)
    last = [log.last_event() for log in logs if len(log)]
    return started, max(last) if last else max(t.finished_at for t in telemetry)


def judge_run(record: RunRecord, table: JobTable, strategy: Strategy, settings: RunSettings, seeded: SeededJobs, *,
              releases: bool, fed: feedfigures.ProducerOutcome | None = None,
              delivery: Delivery = "at-least-once") -> RunResult:
    """Judge a finished run from its record and its table. `releases`: can a claim be released before
    it finishes (see WorkerPlan.releases); `fed`: the producer's figures, in a run with --rate;
    `delivery`: the promise a queue library's documentation makes (held_to_promise)."""
    logs, origin = record.logs, record.origin
    if fed is not None:  # the seeded jobs and exactly those the producers committed (pg_claimcheck.engine.fedkeys)
        seeded, logs = fedkeys.judged(seeded, fed.committed, logs)
    outcome = table.outcome(seeded, logs)
    verdict = judge(logs, seeded.first_id, seeded.last_id, drained=record.drained, origin=origin, reaps=record.reaps,
                    releases=releases, keys=seeded.keys, limit=claim_limit(strategy.statements, settings.batch).rows)
    if record.killed and verdict.unclaimed_jobs:
        verdict = _unrecorded(table, verdict, logs, seeded)
    if record.stopped_by == StopReason.STALLED and verdict.unclaimed_jobs:
        verdict = _still_queued(table, verdict, logs, seeded)
    if record.stopped_by in (StopReason.STALLED, StopReason.NO_PROGRESS) and hasattr(table, "waiting"):
        outcome = dataclasses.replace(outcome, waiting=table.waiting())
    measured = record.telemetry
    endings = _sum_counts(t.lost_sqlstates for t in measured)
    limits = table.settings(settings_to_read(endings)) if endings and hasattr(table, "settings") else {}
    verdict = held_to_promise(verdict, outcome, delivery, faulted=bool(record.faults))
    if record.faults:
        fates(record.faults, logs, record.stalled, origin, table.final_status)
    started, finished = record.span
    return RunResult(
        strategy=strategy, settings=settings, seeded=seeded, verdict=verdict, waits=record.waits, table=outcome,
        elapsed_s=finished - started, stopped_by=record.stopped_by,
        claim_latency_ms=latency_summary(x for t in measured for x in t.claim_latency_ms),
        serialization_failures=sum(t.serialization_failures for t in measured),
        deadlocks=sum(t.deadlocks for t in measured),
        claim_statements=sum(t.claim_statements for t in measured) if record.claim_statements is None
        else record.claim_statements,
        empty_claims=sum(t.empty_claims for t in measured), faults_skipped=record.faults_skipped,
        reconnects=sum(t.reconnects for t in measured), workers_replaced=record.workers_replaced,
        reaped=len(record.reaps), faults=record.faults,
        claim_errors=_sum_counts(t.sqlstates for t in measured),
        # Over the claimers' whole time, past the last job: a stall or a slow end shows as empty buckets.
        claims_over_time=claims_over_time(logs, origin, record.observed_s),
        stop_reason=record.stop_reason, cpu_s=cpu_use(measured, record.coordinator_cpu_s), producer=fed,
        over_time=record.over_time, session_endings=endings, server_limits=limits,
        power=run_power(logs, record, strategy, settings, verdict, releases),
    )


def _sets_lease(strategy: Strategy) -> bool:
    """Does the claim set a lease (it takes the run's `%(lease_seconds)s`)?"""
    return any("lease_seconds" in placeholders(strategy.statements[section])
               for section in ("pick", "claim") if strategy.has(section))


def run_power(logs: list[WorkerLog], record: RunRecord, strategy: Strategy, settings: RunSettings, verdict: Verdict,
              releases: bool) -> power.Power:
    """The run's power figures (pg_claimcheck.verdict.power) from its records and what it was."""
    latencies = {t.worker: t.claim_latency_ms for t in record.telemetry}
    claims, overlapping = power.overlapping_claims(logs, latencies)
    texts = " ".join(strategy.statements.values())
    released = bool(verdict.redeliveries or record.reaps or record.faults or verdict.stale_completions)
    # In lock mode the job is held by its row lock for its whole work: a lease the claim writes never ends.
    leased = settings.mode != Mode.LOCK and (releases or _sets_lease(strategy))
    return power.Power(claims, overlapping, power.lock_waits(record.waits.events, record.waits.samples),
                       power.unseen(overlapping=overlapping, leased=leased, released=released,
                                    session_locks=bool(power.SESSION_LOCK.search(texts)), fail_rate=settings.fail_rate,
                                    retried=verdict.redeliveries > 0))


Delivery = Literal["exactly-once", "at-least-once", "at-most-once"]
"""A queue library's documented delivery promise (pg_claimcheck.libs._adapter.LibraryAdapter.delivery)."""


def held_to_promise(verdict: Verdict, outcome: TableOutcome, delivery: Delivery, *, faulted: bool) -> Verdict:
    """The ledger's verdict held to what the library promised. At-least-once (and exactly-once, which
    a queue can only give as at-least-once with a release the ledger tells from a duplicate) is what
    the ledger judges as it is: a duplicate with no failure, a job run twice at once or again after it
    finished, a lost job, each a violation. At-most-once rules out every second execution, a redelivery
    after a failure included, and allows a job lost to a failure: after an injected fault, the jobs the
    run ended without (never run, or taken and gone from the table) are `lost_as_promised`, not lost."""
    if delivery != "at-most-once":
        return verdict
    lost = max(verdict.unclaimed_jobs, outcome.queued + outcome.running) if faulted else 0
    return dataclasses.replace(verdict, reruns_against_promise=verdict.redeliveries, lost_as_promised=lost,
                               unclaimed_jobs=0 if faulted else verdict.unclaimed_jobs)


def cpu_use(telemetry: list[WorkerTelemetry], coordinator_s: float | None) -> dict:
    """The harness's own CPU in the run: its workers' (summed) and its coordinator's, in seconds.
    Against pgbench's CPU on the same SQL it says what our client costs (see pg_claimcheck.engine.pgbench)."""
    used = [t.cpu_s for t in telemetry if t.cpu_s is not None]
    return {"workers": round(sum(used), 4) if used else None,
            "coordinator": None if coordinator_s is None else round(coordinator_s, 4)}


def _unrecorded(table: JobTable, verdict: Verdict, logs: list[WorkerLog], seeded: SeededJobs) -> Verdict:
    """A worker killed between a commit and its next flush takes that claim's record with it. Jobs
    the table shows finished but no log claimed were claimed by such a worker: not lost. Without a
    reaper to return the others (a Locust run, RunTable's `unreaped`), a job the table shows taken
    but unfinished was claimed by one too."""
    found = table.unrecorded(_never_claimed(logs, seeded))
    if found is None:
        return verdict
    finished, taken = found
    return dataclasses.replace(verdict, unclaimed_jobs=verdict.unclaimed_jobs - taken, unrecorded_claims=taken,
                               jobs_finished=verdict.jobs_finished + finished)


def _never_claimed(logs: list[WorkerLog], seeded: SeededJobs) -> list[int]:
    claimed = {job for log in logs for job in log.job}
    return [job for job in range(seeded.first_id, seeded.last_id + 1) if job not in claimed]


def _still_queued(table: JobTable, verdict: Verdict, logs: list[WorkerLog], seeded: SeededJobs) -> Verdict:
    """A stalled run's jobs that no worker claimed and the table shows still queued, never taken, are
    not lost: they wait in the queue, a liveness failure the run's `liveness` names (jobs gone from
    the queue without a claim stay lost). Where the table cannot tell (a file's own tables), lost."""
    waiting = table.still_queued(_never_claimed(logs, seeded)) if hasattr(table, "still_queued") else None
    if not waiting:
        return verdict
    waiting = min(waiting, verdict.unclaimed_jobs)
    return dataclasses.replace(verdict, unclaimed_jobs=verdict.unclaimed_jobs - waiting,
                               unreached_jobs=verdict.unreached_jobs + waiting)


def _sum_counts(counts) -> dict[str, int]:
    total: dict[str, int] = {}
    for c in counts:
        for k, v in c.items():
            total[k] = total.get(k, 0) + v
    return dict(sorted(total.items()))
