"""Run a strategy under planner conditions: each condition's plan, and a short run per new plan.

For each condition (pg_claimcheck.plans.conditions), in order: build its tables, EXPLAIN the claim's
picking statement under it (in a rolled-back transaction, on a connection of its own), and run
the workers only when that plan's shape was not tried already: a condition that gives a plan
already run would repeat a run that cannot differ in how the claim picks rows. The verdict of
the whole is the worst run's (every run is a RunResult judged by the ledger, as any other).
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Callable

import psycopg
from psycopg import ClientCursor, sql

from pg_claimcheck.contract.dialect import to_positional
from pg_claimcheck.contract.strategy import Strategy, server_message
from pg_claimcheck.engine.budget import Budget
from pg_claimcheck.engine.driver import NothingReleases, run_strategy
from pg_claimcheck.errors import SqlFileError
from pg_claimcheck.plans.conditions import (
    CONDITION_WORKERS,
    EXPIRY_LEASE_S,
    EXPIRY_REAP_EVERY_S,
    EXPIRY_STALLS,
    Condition,
    TablesUnavailable,
    build_tables,
    under,
)
from pg_claimcheck.plans.shape import EXPLAIN_PREFIX, EXPLAIN_TIMEOUT_MS, SAMPLE_VALUES, PlanShape, explain
from pg_claimcheck.plans.timing import shadowed
from pg_claimcheck.server.provision import Server
from pg_claimcheck.server.runcontext import RunContext
from pg_claimcheck.settings import FaultPlan, Mode, RunSettings
from pg_claimcheck.verdict.liveness import HELD, NO_PROGRESS, VIOLATED
from pg_claimcheck.verdict.result import RunResult

PREPARED = "claimcheck_plan"
CONDITION_VERDICTS = {HELD: "held", VIOLATED: "VIOLATED", NO_PROGRESS: "no progress"}
"""A condition's verdict word from its run's outcome (pg_claimcheck.verdict.liveness)."""
CONDITION_SECONDS = 5.0
"""A condition's run stops after this long (`stopped_by: duration`; its jobs not reached are not lost)."""


@dataclass(frozen=True)
class ConditionOutcome:
    """One condition tried: its plan, and its run's verdict or why it had none."""

    condition: Condition
    shape: PlanShape | None
    """None: the condition does not apply to this strategy (see Condition.applies_to)."""
    verdict: str
    """`held`, `VIOLATED`, `no progress` (a liveness failure), `skipped` (its plan was run already, under `same_as`), `not applicable`
    or `not run` (a violation was proven under an earlier condition: see `note`)."""
    same_as: str | None = None
    note: str | None = None
    setting: str = ""
    """The setting of the check (mode, workers, batch) this condition was tried for."""
    result: RunResult | None = None
    seconds: float = 0.0
    """Building its tables, planning and running."""

    @property
    def failed(self) -> bool:
        return self.verdict == "VIOLATED"

    def evidence(self) -> list[str]:
        """For a violation, what shows it: over-claims (N rows for LIMIT n) and double claims, in words."""
        if self.result is None or self.result.exactly_once:
            return []
        from pg_claimcheck.report.render import violation_summary

        v, lines = self.result.verdict, []
        over = [e for e in v.shape_evidence if e["kind"] == "over-claim"]
        if over:
            # The limit the over-claims were judged against: --batch, or the LIMIT the claim writes.
            lines.append(f"over-claim: {v.over_claims:,} claim(s) took more rows than the limit, up to "
                         f"{max(e['rows'] for e in over):,} rows for LIMIT {self.result.claim_limit.describe()}")
        if v.double_claimed_jobs:
            lines.append(f"{v.double_claimed_jobs:,} job(s) claimed twice")
        return lines or violation_summary(self.result)

    def as_dict(self) -> dict:
        return {"condition": self.condition.name, "summary": self.condition.summary,
                "settings": dict(self.condition.settings), "verdict": self.verdict, "same_as": self.same_as,
                "note": self.note, "setting": self.setting,
                "seconds": round(self.seconds, 3), "evidence": self.evidence(),
                "advice": self.shape.advice if self.shape is not None else None,
                **(self.shape.as_dict() if self.shape is not None else
                   {"shape": None, "plan": [], "rescanned_limit": [], "limit_loops": [], "opaque": False, "row_lock": True})}


def explore(conn: psycopg.Connection, server: Server, run: RunContext, strategy: Strategy, settings: RunSettings,
            conditions: tuple[Condition, ...], on_outcome: Callable[[ConditionOutcome], None] | None = None,
            budget: Budget | None = None) -> list[ConditionOutcome]:
    """Every condition tried on `strategy` at `settings`; conn is the coordinator's, in the run's schema.

    The as-seeded condition is planned first (a condition giving its plan is skipped, unless the plan
    is opaque: a claim in a function shows no Limit, and its statements' plans are not seen) but run last:
    the short runs come first, and a check that stops at a proven violation (`stop_early`, check's
    default) is decided by them in seconds; the conditions after that one, the as-seeded run among
    them, are then `not run`. `--drain` runs them all.

    With a `budget` (pg_claimcheck.engine.budget) each short run stops at its slice of it, and the run as
    seeded is sized from what they measured and stops at the budget's end.
    """
    tried: dict[str, str] = {}
    outcomes: list[ConditionOutcome] = []
    deferred: tuple[Condition, PlanShape] | None = None
    stopped_by: str | None = None

    def record(outcome: ConditionOutcome) -> None:
        nonlocal stopped_by
        outcome = dataclasses.replace(outcome, setting=f"{settings.mode} {settings.workers}w batch {settings.batch}")
        outcomes.append(outcome)
        if outcome.failed and settings.stop_early:
            stopped_by = stopped_by or outcome.condition.name
        if on_outcome:
            on_outcome(outcome)

    for condition in conditions:
        started = time.perf_counter()
        if stopped_by:
            record(_not_run(condition, stopped_by))
        elif not condition.applies_to(strategy):
            record(ConditionOutcome(condition, None, "not applicable",
                                    note="needs claimcheck's jobs table; this file brings its own tables"))
        elif (why := condition.unavailable(run.topology)) is not None:
            record(ConditionOutcome(condition, None, "not applicable", note=why))
        elif condition.expiry and settings.mode != Mode.LEASE:
            record(ConditionOutcome(condition, None, "not applicable",
                                    note="in lock mode a job's row lock is held for its whole work: no lease ends"))
        else:
            run_settings = condition_settings(condition, settings)
            try:
                seeded = build_tables(conn, run, strategy, condition, run_settings.jobs)
            except TablesUnavailable as exc:
                record(ConditionOutcome(condition, None, "not applicable", note=str(exc)))
                continue
            if condition.timing:
                record(_run_timed(conn, server, run, strategy, condition,
                                  _sliced(run_settings, budget, conditions, condition), seeded, started, budget))
                continue
            if condition.expiry:  # the plan is as-seeded's; what it changes is whether leases end
                shape = plan_under(run, strategy, condition, run_settings.batch)
                try:
                    record(_run(conn, server, run, strategy, condition, shape,
                                _sliced(run_settings, budget, conditions, condition), seeded, started, budget=budget))
                except NothingReleases:
                    record(ConditionOutcome(condition, None, "not applicable", seconds=time.perf_counter() - started,
                                            note="its own tables have no 'reap' section and its claim returns no "
                                                 "lease_until: nothing gives back a claim whose lease ended"))
                continue
            shape = plan_under(run, strategy, condition, run_settings.batch)
            if condition.table == "seeded":  # its tables are built again for its run, last
                tried[shape.signature], deferred = condition.name, (condition, shape)
            elif shape.signature in tried and not shape.opaque:  # an opaque plan is run under every condition
                record(ConditionOutcome(condition, shape, "skipped", same_as=tried[shape.signature],
                                        seconds=time.perf_counter() - started))
            else:
                tried[shape.signature] = condition.name
                record(_run(conn, server, run, strategy, condition, shape,
                            _sliced(run_settings, budget, conditions, condition), seeded, started, budget=budget))
    if deferred is not None:
        condition, shape = deferred
        if stopped_by:
            record(_not_run(condition, stopped_by, shape))
        else:
            caught = budget and budget.measure(settings, lambda sizing: _sizing_run(
                conn, server, run, strategy, condition, shape, sizing))
            if caught:
                record(ConditionOutcome(condition, shape, CONDITION_VERDICTS[caught.outcome], result=caught,
                                        note=f"caught by the sizing run of {caught.seeded.count:,} jobs"))
                return outcomes
            started = time.perf_counter()
            settings = budget.sized(settings) if budget else settings
            seeded = build_tables(conn, run, strategy, condition, settings.jobs)
            record(_run(conn, server, run, strategy, condition, shape, settings, seeded, started,
                        budget and budget.final_deadline(), budget))
    return outcomes


def _sizing_run(conn: psycopg.Connection, server: Server, run: RunContext, strategy: Strategy, condition: Condition,
                shape: PlanShape, settings: RunSettings) -> RunResult:
    """A budget's sizing run (pg_claimcheck.engine.budget): the run as seeded's claim and settings on a
    table of `settings.jobs`, built as the run's own."""
    seeded = build_tables(conn, run, strategy, condition, settings.jobs)
    result = run_strategy(conn, server, run, under(strategy, condition), settings, seeded=seeded)
    return dataclasses.replace(result, condition=condition.name, condition_plan=shape)


def _run(conn: psycopg.Connection, server: Server, run: RunContext, strategy: Strategy, condition: Condition,
         shape: PlanShape, settings: RunSettings, seeded, started: float, deadline: float | None = None,
         budget: Budget | None = None) -> ConditionOutcome:
    result = run_strategy(conn, server, run, under(strategy, condition), settings, seeded=seeded, deadline=deadline)
    result = dataclasses.replace(result, condition=condition.name, condition_plan=shape)
    if budget is not None:
        budget.record(condition.name, time.perf_counter() - started, result)
    return ConditionOutcome(condition, shape, CONDITION_VERDICTS[result.outcome], result=result,
                            seconds=time.perf_counter() - started)


def _run_timed(conn: psycopg.Connection, server: Server, run: RunContext, strategy: Strategy, condition: Condition,
               settings: RunSettings, seeded, started: float, budget: Budget | None = None) -> ConditionOutcome:
    """A timing condition's run, its tables behind the pausing views (pg_claimcheck.plans.timing); a file
    whose statements cannot read its tables through a view (a `ctid`, a TRUNCATE) is not applicable,
    with the server's reason. Its plan is shown but never compared: the condition changes timing, not plans."""
    try:
        with shadowed(conn):
            shape = plan_under(run, strategy, condition, settings.batch)
            return _run(conn, server, run, strategy, condition, shape, settings, seeded, started, budget=budget)
    except (psycopg.Error, SqlFileError) as exc:
        reason = (exc.diag.message_primary if isinstance(exc, psycopg.Error) else None) or str(exc)
        return ConditionOutcome(condition, None, "not applicable", note="its tables behind a view: " + reason.strip(),
                                seconds=time.perf_counter() - started)


def _sliced(settings: RunSettings, budget: Budget | None, conditions: tuple[Condition, ...],
            condition: Condition) -> RunSettings:
    """A short run's settings capped at its slice of the check's time budget (from its workers'
    release), if the check has one: a planner condition's and a timing condition's alike."""
    if budget is None:
        return settings
    return dataclasses.replace(settings, time_cap_s=budget.condition_slice(_left(conditions, condition),
                                                                           CONDITION_SECONDS))


def _left(conditions: tuple[Condition, ...], condition: Condition) -> int:
    """The short runs that may still come, this one among them (the run as seeded is not one)."""
    following = conditions[conditions.index(condition):]
    return sum(1 for c in following if c.table != "seeded")


def _not_run(condition: Condition, stopped_by: str, shape: PlanShape | None = None) -> ConditionOutcome:
    return ConditionOutcome(condition, shape, "not run", note=f"a violation was proven under {stopped_by} "
                                                              "already; --drain runs every condition")


def condition_settings(condition: Condition, settings: RunSettings) -> RunSettings:
    """A condition's run: your settings on its own table, few workers, no faults (lease-expiry's
    stalls only) and at most CONDITION_SECONDS (a short run: the plan, not the load, is what it tries; a rescanned limit
    over-claims in its first claim, and a plan that makes each claim slow must not hold the check
    for a minute: good_job's claim under nested-loop took a second per claim); the as-seeded run is
    yours unchanged."""
    if condition.table == "seeded":
        return settings
    short = dataclasses.replace(settings, jobs=condition.jobs(settings.jobs, settings.batch),
                                workers=min(settings.workers, CONDITION_WORKERS), faults=None,
                                time_cap_s=CONDITION_SECONDS)
    if condition.expiry:
        return dataclasses.replace(short, lease_seconds=EXPIRY_LEASE_S, reap_every_s=EXPIRY_REAP_EVERY_S,
                                   faults=FaultPlan(kills=0, terminates=0, stalls=EXPIRY_STALLS, restarts=0))
    return short


def plan_under(run: RunContext, strategy: Strategy, condition: Condition, batch: int,
               analyze: bool = False) -> PlanShape:
    """EXPLAIN the claim's picking statement under the condition, on a connection of its own, in a
    transaction rolled back (with `analyze` it runs: its locks and changes go with the rollback).
    Under a generic-plan setting the statement is prepared with its parameters as `$n` and the
    plan of `EXECUTE` shown, as a prepared claim gets it."""
    section = strategy.picking_section
    *before, (last, last_names) = strategy.bound_steps[section]
    values = {**SAMPLE_VALUES, "batch": batch}
    generic = condition.generic
    step, sent, offset = 0, None, 0  # where a failure is placed: the statement, as sent, after our prefix
    try:
        with run.connect("plans") as conn, conn.transaction(force_rollback=True):
            conn.execute(sql.SQL("SET LOCAL statement_timeout = {}").format(EXPLAIN_TIMEOUT_MS))
            for name, value in condition.settings:
                conn.execute(sql.SQL("SET LOCAL {} = {}").format(sql.Identifier(name), sql.Literal(value)))
            client = ClientCursor(conn)
            for step, (statement, names) in enumerate(before):  # noqa: B007 (read by the except below)
                conn.execute(statement, _sample(names, values))
            step = len(before)
            params = _sample(last_names, values)
            if not generic:
                sent, offset = client.mogrify(last, params), len(EXPLAIN_PREFIX)
                return explain(conn, sent, analyze=analyze)
            positional, names = to_positional(last)
            prepare = sql.SQL("PREPARE {} AS ").format(sql.Identifier(PREPARED)).as_string(conn)
            sent, offset = positional, len(prepare)
            conn.execute(prepare + positional)
            sent, offset = None, 0
            arguments = ", ".join(client.mogrify("%s", (params[name],)) for name in names)
            execute = f"EXECUTE {PREPARED}" + (f"({arguments})" if names else "")
            return explain(conn, execute, analyze=analyze)
    except psycopg.Error as exc:
        during = f" when planned under {condition.name}" if condition.settings else ""
        raise SqlFileError(server_message(strategy, section, step, exc, sent, offset, during)) from None


def _sample(names: tuple[str, ...], values: dict) -> dict:
    """The sample values a statement uses, by its parameters' names (Strategy.bound_steps); one the
    sample lacks fails on the server, with its name."""
    return {k: values[k] for k in names if k in values}
