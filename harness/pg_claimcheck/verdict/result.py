"""The result of one strategy x setting: what the ledger, the sampler and the table say, and its
object in the JSON contract of docs/contracts.md."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pg_claimcheck.contract.limit import BATCH, ClaimLimit, claim_limit
from pg_claimcheck.settings import StopReason
from pg_claimcheck.verdict import liveness
from pg_claimcheck.verdict.ledger import Verdict
from pg_claimcheck.verdict.liveness import Waiting
from pg_claimcheck.verdict.observed import (
    SAMPLE_INTERVAL_S,
    FaultEvent,
    PgbenchResult,
    ProducerOutcome,
    SeededJobs,
    WaitSamples,
    status_dicts,
)
from pg_claimcheck.verdict.planshape import PlanShape, PlanVerdict
from pg_claimcheck.verdict.power import Power
from pg_claimcheck.verdict.stats import spread

if TYPE_CHECKING:  # only annotations: loading the strategy's module would load psycopg
    from pg_claimcheck.contract.strategy import Strategy
    from pg_claimcheck.settings import RunSettings

AS_SEEDED = "as-seeded"
"""The condition of the run as seeded (the run `check --plans none` makes): compare matches a run of
a report without conditions to it."""


def run_condition(run: dict[str, Any]) -> str:
    """The planner condition a report's run object was made under: a run that names none (schema
    version 1, `--plans none`, bench) is the as-seeded run."""
    return run.get("condition") or AS_SEEDED


@dataclass(frozen=True)
class TableOutcome:
    """The jobs table after the run, read from the server."""

    done: int
    queued: int
    running: int
    failed: int
    max_attempts: int
    over_max_attempts: int = 0
    attempts_total: int = 0
    waiting: Waiting = Waiting()
    """Jobs left queued for a retry not yet due (our jobs table; see pg_claimcheck.verdict.liveness)."""
    by_status: tuple[Any, ...] = ()
    """(status, count, max attempts) per status of our jobs table after the run, as seed 003 prints it."""


@dataclass(frozen=True)
class OverTime:
    """A rate run's series from its start (docs/producers.md), in the JSON as they are."""

    queue: dict[str, Any]
    """`queue_over_time`: the queue sampler's samples (pg_claimcheck.engine.sampler.QueueSamples.series)."""
    summary: dict[str, Any]
    """`queue_summary`: the deepest queue, the dead tuples at the end and at most, the largest table."""
    latency: dict[str, Any]
    """`latency_over_time`: pickup latency per sampling interval (pg_claimcheck.verdict.timeline.latency_over_time)."""

    def as_dict(self) -> dict[str, Any]:
        return {"queue_over_time": self.queue, "queue_summary": self.summary, "latency_over_time": self.latency}


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
    stopped_by: StopReason
    """`drained`, `duration`, `claims-per-worker`, `stalled` (no claim for a while), `violation`
    (a `check` stopped once a violation was proven, see RunSettings.stop_early) or `no-progress`
    (workers kept claiming but no job was finished for a while: a broken queue)."""
    claim_latency_ms: dict[str, Any]
    serialization_failures: int
    deadlocks: int
    claim_statements: int
    reconnects: int = 0
    """Connections the claimers re-established after losing one (a terminated backend, a restart)."""
    workers_replaced: int = 0
    """A queue library's workers that exited on their own and were started again (the library runner
    replaces them, as a process supervisor would): such a library's way to reconnect, which the JSON
    counts in `reconnects` too, as it always has. The fork driver's replacements of killed workers
    are faults, not counted here."""
    reaped: int = 0
    faults: list[FaultEvent] = field(default_factory=list)
    claims_over_time: dict[str, Any] = field(default_factory=dict)
    """Per-worker claims per time bucket (see :mod:`pg_claimcheck.verdict.timeline`)."""
    pgbench: "PgbenchResult | None" = None
    """The same SQL through pgbench on the same table size, when asked for (`bench --pgbench`)."""
    empty_claims: int = 0
    """Claim statements that returned no job (polls of an empty or fully locked queue)."""
    faults_skipped: list[str] = field(default_factory=list)
    """Faults asked for but not injected (a restart of a server we did not start, no worker left)."""
    plan: "PlanVerdict | None" = None
    """The plan guard's verdict on the claim (`bench` asks for it; see `claimcheck explain`)."""
    stop_reason: str | None = None
    """Why the run ended before its drain (a proven violation, no progress), in words."""
    library: dict[str, Any] | None = None
    """A queue library's run (`claimcheck lib`): its name, version, promise and docs, and the
    jobs its own table left unfinished, in its own words (see :mod:`pg_claimcheck.libs`)."""
    repetitions: "tuple[RunResult, ...]" = ()
    """Every repetition of this strategy x setting (`bench --repeat`), this one among them; empty for one run."""
    claim_errors: dict[str, Any] = field(default_factory=dict)
    """Server errors inside claims and completions, by SQLSTATE: each rolled back, counted, retried."""
    cpu_s: dict[str, Any] = field(default_factory=dict)
    """The harness's CPU seconds in the run: `workers` (summed) and `coordinator` (None where not measured)."""
    condition: str | None = None
    """The planner condition this run was made under (`check --plans`, see pg_claimcheck.plans), or None."""
    condition_plan: "PlanShape | None" = None
    """The claim's plan under that condition, from EXPLAIN before the run."""
    producer: "ProducerOutcome | None" = None
    """The open-loop producer's figures (`check --rate`): rates, lag, pickup and end-to-end latency."""
    over_time: OverTime | None = None
    """A rate run's queue depth, dead tuples, table size and pickup latency over time."""
    session_endings: dict[str, Any] = field(default_factory=dict)
    """Sessions the server ended itself, by the SQLSTATE it sent (25P03: idle_in_transaction_session_timeout)."""
    server_limits: dict[str, Any] = field(default_factory=dict)
    """The values of the server settings those endings name (`idle_in_transaction_session_timeout`: `1s`)."""
    power: Power | None = None
    """How hard the run looked: its overlapping claims and what it could not have seen (pg_claimcheck.verdict.power)."""

    @property
    def pgbench_ratio(self) -> float | None:
        """Our jobs/s over pgbench's: 1.0 means the driver costs nothing over pgbench's C client."""
        if self.pgbench is None or self.pgbench.jobs_per_s <= 0:
            return None
        return self.throughput_jobs_per_s / self.pgbench.jobs_per_s

    @property
    def jobs_done(self) -> int:
        """Jobs finished, from the ledger (a queue that deletes finished jobs leaves no 'done' row)."""
        return self.verdict.jobs_finished

    @property
    def throughput_jobs_per_s(self) -> float:
        return self.jobs_done / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def unfinished_jobs(self) -> int:
        return self.table.queued + self.table.running

    @property
    def lifecycle_ok(self) -> bool:
        """After a drain with jobs coming back: every job done or failed, attempts within max. Jobs
        left queued by a run that stalled or made no progress are a liveness failure, not this."""
        if not (self.settings.lifecycle and self.settings.drains) or self.stopped_by == StopReason.DURATION:
            return True
        # A library that promises at-most-once may end without the jobs a fault took (verdict.lost_as_promised).
        unfinished_ok = (self.unfinished_jobs <= self.verdict.lost_as_promised
                         or self.stopped_by in (StopReason.STALLED, StopReason.NO_PROGRESS))
        return unfinished_ok and self.table.over_max_attempts == 0

    @property
    def progressed(self) -> bool:
        """False when the run made no progress within its limits (see :attr:`liveness`)."""
        return self.liveness is None

    @property
    def violated(self) -> bool:
        """A safety violation: a job handed out twice, lost, over-claimed, completed stale, beyond its
        max_attempts (the ledger's verdict and the lifecycle check)."""
        return not (self.verdict.exactly_once and self.lifecycle_ok)

    @property
    def liveness(self) -> str | None:
        """Why the run made no progress within its limits (pg_claimcheck.verdict.liveness), or None."""
        left = self.verdict.unreached_jobs if self.stopped_by == StopReason.STALLED else 0
        if self.settings.lifecycle and self.stopped_by == StopReason.STALLED:
            left = max(left, self.unfinished_jobs - self.verdict.lost_as_promised)
        return liveness.failure(self.stopped_by, self.stop_reason, self.jobs_done, self.seeded.count, left,
                                self.elapsed_s, self.table.waiting, self.session_endings, self.server_limits)

    @property
    def outcome(self) -> str:
        """`held`, `violated` (safety, exit 1) or `no-progress` (liveness, exit 3): a violation wins."""
        if self.violated:
            return liveness.VIOLATED
        return liveness.NO_PROGRESS if self.liveness is not None else liveness.HELD

    @property
    def stopped_early(self) -> bool:
        """A `check` ended before the drain once a violation was proven (`--drain` runs to the end)."""
        return self.stopped_by == StopReason.VIOLATION

    @property
    def exactly_once(self) -> bool:
        """The one verdict: the CLI's exit code, bench, compare, the reports, the pytest plugin and
        claimcheck.assert_exactly_once all use it."""
        return not self.violated and self.progressed

    def repetition_dicts(self) -> list[dict[str, Any]]:
        """Each repetition's headline figures, in the order run (this run alone without --repeat)."""
        return [{"throughput_jobs_per_s": round(r.throughput_jobs_per_s, 1), "elapsed_s": round(r.elapsed_s, 4),
                 "jobs_done": r.jobs_done, "double_claimed_jobs": r.verdict.double_claimed_jobs,
                 "exactly_once": r.exactly_once, "claim_p95_ms": r.claim_latency_ms.get("p95")}
                for r in (self.repetitions or (self,))]

    @property
    def claim_limit(self) -> ClaimLimit:
        """What one claim asked for, the bound of an over-claim (see pg_claimcheck.contract.limit).
        A library run has no claim text: its claims take one job each (`batch` 1)."""
        if self.library is not None:
            return ClaimLimit(self.settings.batch, BATCH)
        return claim_limit(self.strategy.statements, self.settings.batch)

    def as_dict(self) -> dict[str, Any]:
        """One run object of the JSON contract in docs/contracts.md (section 3)."""
        v, s = self.verdict, self.settings
        repetitions = self.repetition_dicts()
        throughput = spread([r["throughput_jobs_per_s"] for r in repetitions])
        data: dict[str, Any] = {
            "strategy": self.strategy.name, "source": self.strategy.source, "isolation": self.strategy.isolation,
            "expected": self.strategy.expected, "workers": s.workers, "jobs": s.jobs, "batch": s.batch,
            "mode": s.mode, "work_ms": str(s.work), "claims": v.claims, "unique_jobs_claimed": v.unique_jobs_claimed,
            "double_claimed_jobs": v.double_claimed_jobs, "extra_claims": v.extra_claims,
            "unclaimed_jobs": v.unclaimed_jobs, "unreached_jobs": v.unreached_jobs,
            "unexpected_jobs": v.unexpected_jobs,
            "stale_completions": v.stale_completions, "never_finished_jobs": v.never_finished,
            "jobs_done": self.jobs_done,
            "jobs_failed": self.table.failed, "max_attempts": self.table.max_attempts,
            "serialization_failures": self.serialization_failures, "deadlocks": self.deadlocks,
            "claim_statements": self.claim_statements, "empty_claims": self.empty_claims,
            "elapsed_s": round(self.elapsed_s, 4),
            "throughput_jobs_per_s": throughput["median"], "throughput": throughput, "repetitions": repetitions,
            "claim_latency_ms": self.claim_latency_ms,
            "wait_events": dict(self.waits.events.most_common()), "wait_samples": self.waits.samples,
            "wait_sample_interval_s": SAMPLE_INTERVAL_S,
            "max_waiting_workers": self.waits.max_waiting_workers, "stopped_by": self.stopped_by,
            "stop_reason": self.stop_reason,
            "seed_seconds": round(self.seeded.seconds, 3),
            "exactly_once": self.exactly_once,
            "outcome": self.outcome, "liveness": self.liveness, "session_endings": self.session_endings,
            "violations": [x.as_dict() for x in v.violations],
            "pgbench_jobs_per_s": None if self.pgbench is None else round(self.pgbench.jobs_per_s, 1),
            "pgbench_ratio": None if self.pgbench_ratio is None else round(self.pgbench_ratio, 3),
            "pgbench": None if self.pgbench is None else self.pgbench.as_dict(),
            "cpu_s": {"workers": self.cpu_s.get("workers"), "coordinator": self.cpu_s.get("coordinator")},
            "claims_over_time": self.claims_over_time,
            "claim_errors": self.claim_errors, "reconnects": self.reconnects + self.workers_replaced,
            "over_claims": v.over_claims, "over_attempts": v.over_attempts, "claim_limit": self.claim_limit.as_dict(),
            "shape_violations": list(v.shape_evidence),
            "table_by_status": status_dicts(self.table.by_status),
        }
        data["condition"] = self.condition
        data["power"] = self.power.as_dict() if self.power is not None else None
        if self.condition_plan is not None:
            data["condition_plan"] = self.condition_plan.as_dict()
        if self.library is not None:
            data["library"] = self.library
        if self.plan is not None:
            data.update({"plan_shape_ok": self.plan.shape_ok, "plan_reasons": self.plan.reasons})
        if self.producer is not None:  # `check --rate`: the open-loop producer's rates and latencies
            data.update(self.producer.as_dict())
        if self.over_time is not None:
            data.update(self.over_time.as_dict())
        if s.lifecycle:
            data.update({
                "redeliveries": v.redeliveries, "stale_completion_violations": v.stale_completion_violations,
                "unfinished_jobs": self.unfinished_jobs, "over_max_attempts": self.table.over_max_attempts,
                "reaped": self.reaped, "reconnects": self.reconnects + self.workers_replaced, "fail_rate": s.fail_rate,
                "unrecorded_claims": v.unrecorded_claims, "faults_skipped": self.faults_skipped,
                "lease_seconds": s.lease_seconds, "faults": [f.as_dict() for f in self.faults],
            })
        return data
