"""Hypothesis searches schedules of a claim strategy for a double claim, and shrinks what it finds.

A schedule is 2 or 3 sessions, each `BEGIN; [pick;] claim(batch); COMMIT or ROLLBACK`, an
interleaving of their steps, and a few queued jobs. Each drawn schedule becomes a spec and runs
deterministically through the interleaving runner; the property is the ledger's: no job owned
by two sessions at once. `hypothesis.find` returns the minimal schedule that breaks it, which
prints as the same trace a spec run prints and as a spec file that replays it.

Hypothesis is imported where the search runs, not at the top: the CLI imports this module for
`check`'s options with every verb, and hypothesis was a third of the CLI's import time.
"""
from __future__ import annotations

import asyncio
import hashlib
import random
import time
from dataclasses import dataclass
from pathlib import Path

from pg_claimcheck.contract.dialect import bind_some
from pg_claimcheck.contract.strategy import Strategy
from pg_claimcheck.interleave.spec import Spec, Step, render_spec
from pg_claimcheck.interleave.stepper import InterleavingRunner, PermutationResult
from pg_claimcheck.server.provision import Server
from pg_claimcheck.server.runcontext import RunContext
from pg_claimcheck.server.session import run_schema

SESSION_NAMES = ("A", "B", "C")
MAX_JOBS = 4
MAX_BATCH = 3
DEFAULT_EXAMPLES = 200
LEASE_SECONDS = 300


@dataclass(frozen=True)
class SessionPlan:
    batch: int
    commits: bool
    """COMMIT at the end, or ROLLBACK."""


@dataclass(frozen=True)
class Schedule:
    jobs: int
    sessions: tuple[SessionPlan, ...]
    order: tuple[int, ...]
    """The session of each step, in the order they run; each session's steps keep their order."""


def steps_per_session(strategy: Strategy) -> int:
    """BEGIN, each statement of the pick and of the claim, COMMIT or ROLLBACK."""
    return 2 + len(strategy.steps("claim")) + (len(strategy.steps("pick")) if strategy.has_pick else 0)


def schedules(strategy: Strategy):
    """The hypothesis strategy of a strategy's schedules."""
    from hypothesis import strategies as st

    @st.composite
    def schedule(draw) -> Schedule:
        count = draw(st.integers(2, 3))
        # Every choice shrinks toward the simplest story: fewer sessions, batch 1, COMMIT, one job,
        # and session A's steps first.
        plans = tuple(SessionPlan(batch=draw(st.integers(1, MAX_BATCH)), commits=not draw(st.booleans()))
                      for _ in range(count))
        remaining = [steps_per_session(strategy)] * count
        order = []
        while any(remaining):
            ready = [i for i, n in enumerate(remaining) if n]
            chosen = ready[draw(st.integers(0, len(ready) - 1))]
            remaining[chosen] -= 1
            order.append(chosen)
        return Schedule(jobs=draw(st.integers(1, MAX_JOBS)), sessions=plans, order=tuple(order))

    return schedule()


def _literal(value: object) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return str(value)


def _bind(sql: str, values: dict[str, object]) -> str:
    """The strategy's SQL with its parameters written in as literals; the pick's columns (`%(ids)s`)
    stay parameters, given by the runner from the session's last pick."""
    return bind_some(sql, {name: _literal(value) for name, value in values.items()})


def _section_steps(strategy: Strategy, section: str, low: str, session: str, values: dict) -> list[Step]:
    """One step per statement of a section; the last one is the `pick` / `claim` whose rows count."""
    statements = strategy.steps(section)
    return [Step(f"{low}_{section}" + (f"{i + 1}" if i < len(statements) - 1 else ""), session,
                 section if i == len(statements) - 1 else "step", _bind(text, values), 0)
            for i, text in enumerate(statements)]


def schedule_spec(strategy: Strategy, schedule: Schedule, path: str = "<search>") -> Spec:
    begin = "BEGIN" if strategy.isolation == "read committed" else f"BEGIN ISOLATION LEVEL {strategy.isolation.upper()}"
    sessions: dict[str, tuple[Step, ...]] = {}
    steps: dict[str, Step] = {}
    for index, plan in enumerate(schedule.sessions):
        name = SESSION_NAMES[index]
        values = {"worker": name, "batch": plan.batch, "lease_seconds": LEASE_SECONDS}
        low = name.lower()
        parts = [Step(f"{low}_begin", name, "step", begin, 0)]
        if strategy.has_pick:
            parts += _section_steps(strategy, "pick", low, name, values)
        parts += _section_steps(strategy, "claim", low, name, values)
        end = "COMMIT" if plan.commits else "ROLLBACK"
        parts.append(Step(f"{low}_{end.lower()}", name, "step", end, 0))
        sessions[name] = tuple(parts)
        steps.update({s.name: s for s in parts})
    cursor = {name: 0 for name in sessions}
    permutation = []
    for index in schedule.order:
        name = SESSION_NAMES[index]
        permutation.append(sessions[name][cursor[name]].name)
        cursor[name] += 1
    return Spec(path=path, jobs=schedule.jobs, setup=(), sessions=sessions, permutations=(tuple(permutation),),
                steps=steps, tables=strategy.source if strategy.own_schema else None)


@dataclass
class SearchResult:
    strategy: str
    examples_run: int
    seconds: float
    counterexample: PermutationResult | None
    spec_text: str | None

    @property
    def schedules_per_s(self) -> float:
        return self.examples_run / self.seconds if self.seconds else 0.0


def search(server: Server, strategy: Strategy, *, max_examples: int = DEFAULT_EXAMPLES, seed: int | None = None,
           database: Path | None = None) -> SearchResult:
    """Look for a schedule in which two sessions own the same job; shrink it if found."""
    with run_schema(server) as (_, run):
        return asyncio.run(_search(run, strategy, max_examples, seed, database))


async def _search(run: RunContext, strategy: Strategy, max_examples: int, seed: int | None,
                  database: Path | None) -> SearchResult:
    from hypothesis import HealthCheck, Phase, find, settings
    from hypothesis.database import DirectoryBasedExampleDatabase
    from hypothesis.errors import NoSuchExample

    loop = asyncio.get_running_loop()
    count = 0
    started = time.monotonic()
    async with InterleavingRunner(run, list(SESSION_NAMES)) as runner:

        async def violated(schedule: Schedule) -> bool:
            nonlocal count
            count += 1
            spec = schedule_spec(strategy, schedule)
            result = await runner.run(spec, spec.permutations[0])
            return bool(result.double_claims)

        # find() is synchronous and calls the condition many times; run it in a thread that
        # hands each schedule back to this event loop, where the runner's connections live.
        def condition(schedule: Schedule) -> bool:
            return asyncio.run_coroutine_threadsafe(violated(schedule), loop).result()

        key = hashlib.sha256(repr(sorted(strategy.statements.items())).encode() +
                             strategy.isolation.encode()).digest()
        options = settings(max_examples=max_examples, deadline=None, suppress_health_check=list(HealthCheck),
                           database=DirectoryBasedExampleDatabase(str(database)) if database else None,
                           phases=[Phase.reuse, Phase.generate, Phase.shrink], report_multiple_bugs=False)
        try:
            found = await asyncio.to_thread(find, schedules(strategy), condition, settings=options,
                                            random=random.Random(seed) if seed is not None else None,
                                            database_key=key)
        except NoSuchExample:
            return SearchResult(strategy.name, count, time.monotonic() - started, None, None)
        searched = time.monotonic() - started
        spec = schedule_spec(strategy, found, path=f"{strategy.name}-counterexample.spec")
        final = await runner.run(spec, spec.permutations[0])
    header = (f"Counterexample for {strategy.name} found by `claimcheck check --search` "
              f"after {count} schedules.\nReplay it with: claimcheck interleave THIS_FILE.spec")
    return SearchResult(strategy.name, count, searched, final, render_spec(spec, header))
