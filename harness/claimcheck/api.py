"""The public API: run a claim file from Python and judge it, without the CLI or pytest.

    >>> import claimcheck
    >>> result = claimcheck.run("sql/claim.sql", workers=8, jobs=5_000, dsn="postgresql://…")  # doctest: +SKIP
    >>> result.exactly_once                                                                    # doctest: +SKIP
    True
    >>> claimcheck.assert_exactly_once("sql/claim.sql", workers=16)                            # doctest: +SKIP

A queue library is checked the same way through its own workers (see `claimcheck lib`)::

    >>> claimcheck.assert_exactly_once(lib="procrastinate", workers=4, jobs=2_000, faults=True)  # doctest: +SKIP

The server is `dsn`, else `$CLAIMCHECK_DSN`, else an embedded PostgreSQL started for the call
(and stopped after it). Every call works in a schema of its own and drops it when it ends.
`settings` are :class:`claimcheck.settings.RunSettings` fields; `work_ms` also takes the CLI's
forms (``5``, ``"1-10"``, ``"exp:5"``). The pytest plugin's fixture calls the same functions.
"""
from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from claimcheck.server.provision import Server
    from claimcheck.verdict.result import RunResult


class ExactlyOnceViolated(AssertionError):
    """A run finished and some job was not handled exactly once; the message is the evidence."""

    def __init__(self, message: str, result: "RunResult") -> None:
        super().__init__(message)
        self.result = result


def run(strategy: str | os.PathLike | None = None, *, lib: str | None = None, dsn: str | None = None,
        server: "Server | None" = None, plans: str = "none", **settings: Any) -> "RunResult":
    """Run a `.sql` file or a built-in strategy once, or with `lib=` a queue library's own
    workers, and return the full result. `plans` (`none`, `default`, `all`: `check --plans`, see
    docs/plans.md) also runs it under planner conditions: the result is then the first run that
    violated exactly-once (its `condition` names the condition, `condition_plan` its plan), else
    the run as seeded."""
    if lib is not None:
        if strategy is not None:
            raise TypeError("give a strategy or lib=, not both")
        return run_lib(lib, dsn=dsn, server=server, **settings)
    if strategy is None:
        raise TypeError("run() needs a strategy (a .sql file or a built-in name) or lib=")
    from claimcheck.engine.driver import run_strategy
    from claimcheck.errors import UsageError
    from claimcheck.plans.conditions import CHOICES
    from claimcheck.plans.explore import explore
    from claimcheck.server.pooling import refuse_transaction_blocks
    from claimcheck.server.provision import provide_server
    from claimcheck.server.schema import new_run_id
    from claimcheck.server.session import run_schema
    from claimcheck.settings import RunSettings, WorkTime
    from claimcheck.contract.strategy import load_strategy

    if "work_ms" in settings:
        settings["work"] = WorkTime.parse(str(settings.pop("work_ms")))
    if plans not in CHOICES:
        raise UsageError(f"plans={plans!r}: one of {', '.join(CHOICES)}")
    loaded = load_strategy(str(strategy))
    run_settings = RunSettings(**settings)
    with contextlib.ExitStack() as stack:
        if server is None:
            server = stack.enter_context(provide_server(dsn=dsn))
        refuse_transaction_blocks(server.pooler, [loaded], [run_settings.mode])
        conn, run_context = stack.enter_context(run_schema(server, run_id=new_run_id()))
        if not CHOICES[plans]:
            return run_strategy(conn, server, run_context, loaded, run_settings)
        runs = [o.result for o in explore(conn, server, run_context, loaded, run_settings, CHOICES[plans])
                if o.result is not None]
        return next((r for r in runs if not r.exactly_once), runs[-1])


def run_lib(lib: str, *, dsn: str | None = None, server: "Server | None" = None, workers: int = 4,
            jobs: int = 2_000, work_ms: str | float | None = None, faults: bool = False,
            duration_s: float | None = None) -> "RunResult":
    """Run a queue library's own workers (`claimcheck lib LIB`) once, in a database of its own."""
    from claimcheck.libs import load_adapter
    from claimcheck.libs.runner import lib_settings, run_library
    from claimcheck.server.provision import provide_server

    adapter = load_adapter(lib)
    settings = lib_settings(workers, jobs, work_ms, faults, duration_s)
    with contextlib.ExitStack() as stack:
        if server is None:
            server = stack.enter_context(provide_server(dsn=dsn))
        return run_library(server, adapter, settings)


def assert_exactly_once(strategy: str | os.PathLike | None = None, *, lib: str | None = None, workers: int = 16,
                        jobs: int = 20_000, batch: int = 10, mode: str = "lease", dsn: str | None = None,
                        server: "Server | None" = None, plans: str = "default", **settings: Any) -> "RunResult":
    """Raise :class:`ExactlyOnceViolated` with the evidence unless every job was handled exactly once
    (the same verdict the CLI's exit code gives). Like `claimcheck check`, it runs the claim under
    the default planner conditions too (``plans="none"``: the run as seeded only; the message names
    the condition that failed and its plan) and stops at the first proven violation, so a broken
    claim fails in seconds; pass ``stop_early=False`` to drain.
    With `lib=`, a queue library's own workers are judged by its promise (batch and mode are the
    library's own and ignored)."""
    if lib is not None:
        result = run(strategy, lib=lib, dsn=dsn, server=server, workers=workers, jobs=jobs, **settings)
    else:
        settings.setdefault("stop_early", True)
        result = run(strategy, dsn=dsn, server=server, workers=workers, jobs=jobs, batch=batch, mode=mode,
                     plans=plans, **settings)
    if not result.exactly_once:
        raise ExactlyOnceViolated(failure_message(result), result)
    return result


def failure_message(result: "RunResult") -> str:
    """The verdict in one line, then the counterexample: each claim of the first violated jobs."""
    from claimcheck.report.render import evidence_lines, numbering_note, shape_lines, violation_summary

    v, s = result.verdict, result.settings
    head = (f"{result.strategy.source or result.strategy.name} is not exactly-once: "
            f"{'; '.join(violation_summary(result)) or 'violated'}, {v.extra_claims:,} extra claims "
            f"({s.workers} workers, {s.jobs:,} jobs, batch {s.batch}, {s.mode} mode)")
    if result.stop_reason:
        head += f"; {'stopped early' if result.stopped_early else 'ended'}: {result.stop_reason}"
    plan = []
    if result.condition is not None and result.condition_plan is not None:
        from claimcheck.plans.conditions import BY_NAME
        shape = result.condition_plan
        head += f"; under the planner condition {result.condition} ({BY_NAME[result.condition].summary})"
        plan = [f"The claim's plan under {result.condition}:", *shape.text.splitlines(), *shape.why,
                *([f"Fix: {shape.advice}"] if shape.advice else [])]
    return "\n".join([head + f". Evidence (times from the start of the run{numbering_note(result)}):",
                      *evidence_lines(v.violations, first_id=result.seeded.first_id), *shape_lines(v.shape_evidence), *plan])
