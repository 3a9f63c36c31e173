"""`check`: one strategy judged at its settings, under planner conditions or as seeded, from
provisioning to the judged runs. The CLI's `check`, `api.run` and the pytest plugin all call
:func:`check`; they differ in what they listen with (pg_claimcheck.app.events) and what they do with
the result.

The order: the preflight (every refusal, before a server starts), the server, the preflight again
if the server brought a pooler the options did not say, one schema for every run, the runs (each
seeded, validated, run and judged by pg_claimcheck.engine.driver.run_strategy, or under each planner
condition by pg_claimcheck.plans.explore), and the result.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from pg_claimcheck.app.events import RunEvents
from pg_claimcheck.app.preflight import preflight, preflight_on
from pg_claimcheck.app.runs import run_all
from pg_claimcheck.contract.strategy import Strategy
from pg_claimcheck.engine.budget import Budget
from pg_claimcheck.plans.conditions import Condition
from pg_claimcheck.plans.explore import ConditionOutcome, explore
from pg_claimcheck.server.provision import Server
from pg_claimcheck.server.session import run_schema
from pg_claimcheck.server.topology import DIRECT, Topology
from pg_claimcheck.settings import RunSettings
from pg_claimcheck.verdict.result import RunResult


@dataclass(frozen=True)
class Checked:
    """What a check ran: on which server, every run in the order made, and each planner condition's
    outcome (None when it ran as seeded only)."""

    server: Server
    results: list[RunResult]
    outcomes: list[ConditionOutcome] | None

    def deciding(self) -> RunResult:
        """The run that decides the check: the first that violated exactly-once (with the condition
        it ran under), else the first that made no progress, else the last (the run as seeded)."""
        return next((r for r in self.results if r.violated),
                    next((r for r in self.results if not r.exactly_once), self.results[-1]))


def check(provide: Callable[[], AbstractContextManager[Server]], strategy: Strategy, grid: list[RunSettings],
          conditions: tuple[Condition, ...], events: RunEvents, *, asked: Topology = DIRECT,
          budget: Budget | None = None, run_id: str | None = None) -> Checked:
    """Judge `strategy` at each setting of `grid`, under `conditions` (none: as seeded only), on the
    server `provide` gives (a context manager: a server it starts is stopped when the check ends).
    `asked`: the topology the options ask for (our PgBouncer in front of the workers). `budget`, started by the caller
    (its server's start is in it): each run sized to fit, the check ends at its end. `run_id` names its
    schema (pg_claimcheck.server.session.run_schema)."""
    preflight([strategy], grid, asked)
    with provide() as server:
        events.server_ready(server)
        if budget is not None:
            budget.record("server", time.monotonic() - budget.started)
        preflight_on(server, [strategy], grid)
        if not conditions:
            return Checked(server, run_all(server, [strategy], grid, events, budget=budget, run_id=run_id), None)
        results, outcomes = [], []
        with run_schema(server, run_id) as (conn, run):
            for settings in grid:
                events.conditions_started(f"{strategy.name} {settings.mode} {settings.workers}w", len(conditions))
                found = explore(conn, server, run, strategy, settings, conditions,
                                on_outcome=events.condition_finished, budget=budget)
                outcomes.extend(found)
                results.extend(o.result for o in found if o.result is not None)
        return Checked(server, results, outcomes)
