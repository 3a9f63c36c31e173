"""The public API: run a claim file from Python and judge it, without the CLI or pytest.

    >>> import pg_claimcheck
    >>> result = pg_claimcheck.run("sql/claim.sql", workers=8, jobs=5_000, dsn="postgresql://…")  # doctest: +SKIP
    >>> result.exactly_once                                                                    # doctest: +SKIP
    True
    >>> claimcheck.assert_exactly_once("sql/claim.sql", workers=16)                            # doctest: +SKIP

A queue library is checked the same way through its own workers (see `claimcheck lib`)::

    >>> claimcheck.assert_exactly_once(lib="procrastinate", workers=4, jobs=2_000, faults=True)  # doctest: +SKIP

The server is `dsn`, else `$CLAIMCHECK_DSN`, else an embedded PostgreSQL started for the call
(and stopped after it). Every call works in a schema of its own and drops it when it ends.
`settings` are :class:`pg_claimcheck.settings.RunSettings` fields; `work_ms` also takes the CLI's
forms (``5``, ``"1-10"``, ``"exp:5"``). The pytest plugin's fixture calls the same functions.
"""
from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pg_claimcheck.server.provision import Server
    from pg_claimcheck.verdict.result import RunResult


class ExactlyOnceViolated(AssertionError):
    """A run finished and some job was not handled exactly once (a safety violation: handed out
    twice, lost, over-claimed); the message is the evidence."""

    def __init__(self, message: str, result: "RunResult") -> None:
        super().__init__(message)
        self.result = result


class NoProgress(AssertionError):
    """No job was handed out twice or lost, but the queue made no progress within the run's limits (a
    liveness failure: nothing finished, a retry not yet due, the server ending the sessions);
    `cause` says which (pg_claimcheck.verdict.liveness). Not an ExactlyOnceViolated: a test can tell them apart."""

    def __init__(self, message: str, result: "RunResult") -> None:
        super().__init__(message)
        self.result, self.cause = result, result.liveness


def run(strategy: str | os.PathLike | None = None, *, lib: str | None = None, dsn: str | None = None,
        server: "Server | None" = None, plans: str = "none", budget_s: float | None = None,
        **settings: Any) -> "RunResult":
    """Run a `.sql` file or a built-in strategy once, or with `lib=` a queue library's own
    workers, and return the full result. `plans` (`none`, `default`, `all`: `check --plans`, see
    docs/plans.md) also runs it under planner conditions: the result is then the first run that
    violated exactly-once (its `condition` names the condition, `condition_plan` its plan), else
    the first that made no progress, else the run as seeded. `budget_s`: seconds for it all (`check
    --budget`, pg_claimcheck.engine.budget), the jobs sized to fit instead of `jobs`."""
    if lib is not None:
        if strategy is not None:
            raise TypeError("give a strategy or lib=, not both")
        return run_lib(lib, dsn=dsn, server=server, **settings)
    if strategy is None:
        raise TypeError("run() needs a strategy (a .sql file or a built-in name) or lib=")
    from pg_claimcheck.contract.strategy import load_strategy
    from pg_claimcheck.engine.budget import Budget
    from pg_claimcheck.engine.driver import run_strategy
    from pg_claimcheck.errors import UsageError
    from pg_claimcheck.plans.conditions import CHOICES
    from pg_claimcheck.plans.explore import explore
    from pg_claimcheck.server.provision import provide_server
    from pg_claimcheck.server.schema import new_run_id
    from pg_claimcheck.server.session import run_schema
    from pg_claimcheck.server.topology import refuse_transaction_blocks
    from pg_claimcheck.settings import RunSettings, WorkTime

    budget = None if budget_s is None else Budget(budget_s)  # first: a server started here is in it
    if "work_ms" in settings:
        settings["work"] = WorkTime.parse(str(settings.pop("work_ms")))
    if plans not in CHOICES:
        raise UsageError(f"plans={plans!r}: one of {', '.join(CHOICES)}")
    loaded = load_strategy(str(strategy))
    run_settings = RunSettings(**settings)
    with contextlib.ExitStack() as stack:
        if server is None:
            server = stack.enter_context(provide_server(dsn=dsn))
        refuse_transaction_blocks(server.topology, [loaded], [run_settings.mode])
        conn, run_context = stack.enter_context(run_schema(server, run_id=new_run_id()))
        if not CHOICES[plans]:
            if budget is None:
                return run_strategy(conn, server, run_context, loaded, run_settings)
            return run_strategy(conn, server, run_context, loaded, budget.sized(run_settings),
                                deadline=budget.final_deadline())
        runs = [o.result for o in explore(conn, server, run_context, loaded, run_settings, CHOICES[plans],
                                          budget=budget) if o.result is not None]
        return next((r for r in runs if r.violated), next((r for r in runs if not r.exactly_once), runs[-1]))


def run_lib(lib: str, *, dsn: str | None = None, server: "Server | None" = None, workers: int = 4,
            jobs: int = 2_000, work_ms: str | float | None = None, faults: bool = False,
            duration_s: float | None = None) -> "RunResult":
    """Run a queue library's own workers (`claimcheck lib LIB`) once, in a database of its own."""
    from pg_claimcheck.libs import load_adapter
    from pg_claimcheck.libs.runner import lib_settings, run_library
    from pg_claimcheck.server.provision import provide_server

    adapter = load_adapter(lib)
    settings = lib_settings(workers, jobs, work_ms, faults, duration_s)
    with contextlib.ExitStack() as stack:
        if server is None:
            server = stack.enter_context(provide_server(dsn=dsn))
        return run_library(server, adapter, settings)


FIXED_SIZE = ("duration_s", "claims_per_worker", "rate_per_s", "faults")
"""Settings that ask for a run of a fixed size or shape: with them (or `jobs`), no time budget."""


def assert_exactly_once(strategy: str | os.PathLike | None = None, *, lib: str | None = None, workers: int = 16,
                        jobs: int | None = None, batch: int = 10, mode: str = "lease", dsn: str | None = None,
                        server: "Server | None" = None, plans: str = "default", budget_s: float | None = None,
                        **settings: Any) -> "RunResult":
    """Raise :class:`ExactlyOnceViolated` with the evidence if a job was handed out twice, lost or
    over-claimed, and :class:`NoProgress` naming its cause if none was but the queue made no progress
    within the limits (the CLI's exit codes 1 and 3). Like `claimcheck check`, it runs the claim under
    the default planner conditions too (``plans="none"``: the run as seeded only; the message names
    the condition that failed and its plan) and stops at the first proven violation, so a broken
    claim fails in seconds; pass ``stop_early=False`` to drain. Like `check`, it spends a time budget
    (``budget_s``, default 20 s) on as many jobs as fit; ``jobs=N`` (or a duration, a claim count, a
    rate, faults, ``stop_early=False``) asks for a fixed size instead.
    With `lib=`, a queue library's own workers are judged by its promise (batch and mode are the
    library's own and ignored)."""
    if lib is not None:
        result = run(strategy, lib=lib, dsn=dsn, server=server, workers=workers,
                     **({"jobs": jobs} if jobs is not None else {}), **settings)
    else:
        from pg_claimcheck.engine.budget import DEFAULT_BUDGET_S, UNMEASURED_JOBS
        from pg_claimcheck.errors import UsageError

        settings.setdefault("stop_early", True)
        fixed = jobs is not None or not settings["stop_early"] or any(settings.get(k) for k in FIXED_SIZE)
        if budget_s is not None and fixed:
            raise UsageError("budget_s sizes the run by time; jobs=, a duration, a claim count, a rate, faults or "
                             "stop_early=False ask for a fixed size: give one of them")
        if budget_s is None and not fixed:
            budget_s = DEFAULT_BUDGET_S
        result = run(strategy, dsn=dsn, server=server, workers=workers, jobs=UNMEASURED_JOBS if jobs is None else jobs,
                     batch=batch, mode=mode, plans=plans, budget_s=budget_s, **settings)
    if result.violated:
        raise ExactlyOnceViolated(failure_message(result), result)
    if not result.exactly_once:
        raise NoProgress(no_progress_message(result), result)
    return result


def no_progress_message(result: "RunResult") -> str:
    """A liveness failure in one line: what did not happen, and why."""
    s = result.settings
    where = f" under the planner condition {result.condition}" if result.condition is not None else ""
    return (f"{result.strategy.source or result.strategy.name} made no progress{where} ({s.workers} workers, "
            f"{result.seeded.count:,} jobs, batch {s.batch}, {s.mode} mode): {result.liveness}. No job was handed "
            f"out twice or lost ({result.verdict.claims:,} claims, {result.jobs_done:,} done): a liveness failure, "
            "not an exactly-once violation")


def failure_message(result: "RunResult") -> str:
    """The verdict in one line, then the counterexample: each claim of the first violated jobs."""
    from pg_claimcheck.report.render import evidence_lines, shape_lines, violation_summary
    from pg_claimcheck.server.schema import numbering_note

    v, s = result.verdict, result.settings
    head = (f"{result.strategy.source or result.strategy.name} is not exactly-once: "
            f"{'; '.join(violation_summary(result)) or 'violated'}, {v.extra_claims:,} extra claims "
            f"({s.workers} workers, {s.jobs:,} jobs, batch {s.batch}, {s.mode} mode)")
    if result.stop_reason:
        head += f"; {'stopped early' if result.stopped_early else 'ended'}: {result.stop_reason}"
    plan = []
    if result.condition is not None and result.condition_plan is not None:
        from pg_claimcheck.plans.conditions import BY_NAME
        shape = result.condition_plan
        head += f"; under the planner condition {result.condition} ({BY_NAME[result.condition].summary})"
        plan = [f"The claim's plan under {result.condition}:", *shape.text.splitlines(), *shape.why,
                *([f"Fix: {shape.advice}"] if shape.advice else [])]
    return "\n".join([head + f". Evidence (times from the start of the run{numbering_note(result.seeded.first_id)}):",
                      *evidence_lines(v.violations, first_id=result.seeded.first_id), *shape_lines(v.shape_evidence), *plan])
