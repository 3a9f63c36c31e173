"""Runs a spec's permutations step by step on real connections, one per session.

A step is sent on its session's connection; while it has not returned, the runner asks the
server whether it is blocked (`pg_blocking_pids` of its backend, limited to the spec's own
sessions), polling every BLOCK_POLL_S. A blocked step is reported as waiting and the next step
of the permutation runs; after every step, waiting steps are settled again, so completions appear
in the trace where they happen. A step that is neither done nor blocked by us within
STEP_TIMEOUT_S is cancelled and reported. Nothing is decided by sleeping and hoping.
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import psycopg
from psycopg import sql

from pg_claimcheck.contract.claimrows import attempt_of
from pg_claimcheck.contract.dialect import placeholders
from pg_claimcheck.contract.keys import canonical
from pg_claimcheck.contract.queries import QUERIES
from pg_claimcheck.contract.strategy import ClaimShape, load_strategy, pick_params, shape_of
from pg_claimcheck.errors import SqlFileError
from pg_claimcheck.interleave.spec import Spec, SpecError, Step
from pg_claimcheck.server.runcontext import RunContext
from pg_claimcheck.server.schema import owned_schema_sql

BLOCK_POLL_S = 0.002
STEP_TIMEOUT_S = 10.0
CANCEL_TIMEOUT_S = 5.0
# SQLSTATE classes that mean the spec itself is wrong (syntax, unknown objects, unsupported),
# not an outcome of the interleaving such as a serialization failure.
_SPEC_ERROR_CLASSES = ("42", "0A", "26", "34")


@dataclass
class StepResult:
    """What one step returned, or the error it raised."""

    step: Step
    columns: list[str] = field(default_factory=list)
    rows: list[tuple] = field(default_factory=list)
    shape: ClaimShape | None = None
    """How its rows read as claims (key, attempt), as a worker reads them: see strategy.shape_of."""
    status: str = ""
    error: str | None = None
    sqlstate: str | None = None
    waited_ms: float | None = None
    """Set when the step was blocked: how long from sending it to its completion."""
    cancelled: bool = False


@dataclass
class PermutationResult:
    """One permutation's trace events and who ended up owning which job."""

    permutation: tuple[str, ...]
    events: list[tuple[str, object]] = field(default_factory=list)
    """(`ran` | `waiting` | `completed` | `cancelled` | `invalid`, StepResult or text), in order."""
    owned: dict[object, list[tuple[str, int]]] = field(default_factory=dict)
    """job key -> [(session, attempt)] for every committed claim."""
    invalid: str | None = None

    @property
    def double_claims(self) -> dict[object, list[tuple[str, int]]]:
        return {job: owners for job, owners in sorted(self.owned.items(), key=lambda kv: str(kv[0]))
                if len(owners) > 1}

    @property
    def blocked_steps(self) -> list[str]:
        return [r.step.name for kind, r in self.events if kind == "waiting"]  # type: ignore[union-attr]


class InterleavingRunner:
    """Connections for the spec's sessions plus a monitor; `async with` opens and closes them."""

    def __init__(self, run: RunContext, sessions: list[str]) -> None:
        self.context, self.schema = run, run.schema
        self.session_names = sessions
        self.conns: dict[str, psycopg.AsyncConnection] = {}
        self.pids: dict[str, int] = {}
        self.monitor: psycopg.AsyncConnection | None = None
        self.table_built_for: int | None = None

    async def __aenter__(self) -> "InterleavingRunner":
        try:
            self.monitor = await self._connect("monitor")
            for name in self.session_names:
                conn = await self._connect(f"s-{name}")
                self.conns[name] = conn
                self.pids[name] = conn.info.backend_pid
        except BaseException:
            await self.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        for conn in [*self.conns.values(), self.monitor]:
            if conn is not None and not conn.closed:
                await conn.close()

    async def _connect(self, role: str) -> psycopg.AsyncConnection:
        conn = await self.context.connect_async(role)
        if conn.info.server_version >= 140000:
            # A step may sleep or wait for minutes; if we are SIGKILLed meanwhile, the server notices
            # the closed socket only when the statement ends. Checked every second instead, the
            # backend ends with us, and the next run can sweep our schema (ownership.abandoned).
            await conn.execute("SET client_connection_check_interval = 1000")
        return conn

    async def reset_table(self, spec: Spec) -> None:
        """The same starting table for every permutation: `spec.jobs` queued jobs, then the setup."""
        assert self.monitor is not None
        if spec.tables:
            await self._reset_own_tables(spec)
            return
        async with self.monitor.transaction():
            if self.table_built_for is None:
                await self.monitor.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(
                    sql.Identifier(self.schema, "jobs")))
                await self.monitor.execute(sql.SQL(QUERIES["create_jobs"]).format(first_key=1))
                await self.monitor.execute(QUERIES["add_primary_key"])
                await self.monitor.execute(QUERIES["create_ready_index"])
            else:
                await self.monitor.execute("TRUNCATE jobs RESTART IDENTITY")
            await self.monitor.execute(QUERIES["seed_jobs"], {"jobs": spec.jobs})
            for statement in spec.setup:
                try:
                    await self.monitor.execute(statement)
                except psycopg.Error as exc:
                    raise SpecError(f"{spec.path}: setup fails on the server: {_message(exc)}") from None
        if self.table_built_for is None:
            await self.monitor.execute(QUERIES["analyze_jobs"])
        self.table_built_for = spec.jobs

    async def _reset_own_tables(self, spec: Spec) -> None:
        """A strategy file's tables: the run's schema emptied, then its `schema` and `seed` sections
        (keys from 1, so traces read the same every time), then the spec's setup."""
        try:
            strategy = load_strategy(spec.tables)
        except SqlFileError as exc:
            raise SpecError(f"{spec.path}: tables {spec.tables}: {exc}") from None
        if not strategy.own_schema:
            raise SpecError(f"{spec.path}: tables {spec.tables} has no schema, seed and remaining sections")
        values = {"jobs": spec.jobs, "key_base": 1}
        monitor = self.monitor
        async with monitor.transaction():
            # The file's own tables anew for each permutation: the schema again, with its owner record.
            await monitor.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(self.schema)))
            for statement in owned_schema_sql(self.schema):
                await monitor.execute(statement)
            client = psycopg.AsyncClientCursor(monitor)
            for section in ("schema", "seed"):
                for statement, names in strategy.bound_steps[section]:
                    try:
                        await client.execute(statement, {k: values[k] for k in names})
                    except psycopg.Error as exc:
                        raise SpecError(f"{spec.path}: tables {spec.tables}: section '{section}' fails on the "
                                        f"server: {_message(exc)}") from None
            for statement in spec.setup:
                try:
                    await monitor.execute(statement)
                except psycopg.Error as exc:
                    raise SpecError(f"{spec.path}: setup fails on the server: {_message(exc)}") from None
        self.table_built_for = None

    async def run(self, spec: Spec, permutation: tuple[str, ...]) -> PermutationResult:
        await self.reset_table(spec)
        result = PermutationResult(permutation=permutation)
        state = _Ownership()
        waiting: dict[str, tuple[StepResult, asyncio.Task, float]] = {}
        try:
            for name in permutation:
                step = spec.steps[name]
                if step.session in waiting:
                    blocked = waiting[step.session][0].step.name
                    result.invalid = (f"step {name} cannot start: session {step.session} is still waiting "
                                      f"in step {blocked}")
                    result.events.append(("invalid", result.invalid))
                    break
                started = time.monotonic()
                task = asyncio.create_task(self._execute(step, state))
                outcome = await self._settle(step.session, task)
                if outcome == "blocked":
                    waiting[step.session] = (StepResult(step), task, started)
                    result.events.append(("waiting", StepResult(step)))
                else:
                    step_result = task.result()
                    self._check_spec_error(spec, step_result)
                    step_result.cancelled = outcome == "timeout"
                    result.events.append(("cancelled" if step_result.cancelled else "ran", step_result))
                    state.after(step, step_result, self.conns[step.session])
                await self._settle_waiting(spec, waiting, result, state)
        except BaseException:  # Ctrl-C (the task is cancelled) or an error: stop what still runs, at once
            await self._cancel_running()
            raise
        finally:
            await self._finish(waiting, result, state)
        result.owned = state.owned
        return result

    async def _settle_waiting(self, spec: Spec, waiting: dict, result: PermutationResult, state: "_Ownership"
                              ) -> None:
        """Give every waiting step the chance to finish, in the order they blocked, until none moves."""
        progressed = True
        while progressed and waiting:
            progressed = False
            for session, (_, task, started) in list(waiting.items()):
                if await self._settle(session, task) == "blocked":
                    continue
                step_result = task.result()
                self._check_spec_error(spec, step_result)
                step_result.waited_ms = (time.monotonic() - started) * 1000
                result.events.append(("completed", step_result))
                state.after(step_result.step, step_result, self.conns[session])
                del waiting[session]
                progressed = True

    async def _cancel_running(self) -> None:
        """Cancel every session's statement still running on the server, so that neither the rollback
        below nor the user waits for it (a step may be a long pg_sleep or blocked for good)."""
        for conn in self.conns.values():
            if conn.pgconn.transaction_status == psycopg.pq.TransactionStatus.ACTIVE:
                await conn.cancel_safe(timeout=CANCEL_TIMEOUT_S)

    async def _finish(self, waiting: dict, result: PermutationResult, state: "_Ownership") -> None:
        """Cancel steps still waiting at the end and roll back every open transaction."""
        for session, (_, task, started) in waiting.items():
            await self.conns[session].cancel_safe()
            step_result = await task
            step_result.cancelled, step_result.waited_ms = True, (time.monotonic() - started) * 1000
            result.events.append(("cancelled", step_result))
        for conn in self.conns.values():
            if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                await conn.execute("ROLLBACK")
            await conn.execute(QUERIES["release_session_locks"])

    async def _execute(self, step: Step, state: "_Ownership") -> StepResult:
        conn = self.conns[step.session]
        picked = state.picked.get(step.session, {})
        wanted = placeholders(step.sql)
        params = {name: picked.get(name, []) for name in wanted} if wanted else None
        result = StepResult(step)
        try:
            cur = await conn.execute(step.sql, params)
            result.status = cur.statusmessage or ""
            if cur.description:
                result.columns = [d.name for d in cur.description]
                result.shape = shape_of(cur.description)
                result.rows = await cur.fetchall()
        except psycopg.Error as exc:
            result.error, result.sqlstate = _message(exc), exc.sqlstate
        return result

    async def _settle(self, session: str, task: asyncio.Task) -> str:
        """`done`, `blocked` (by another of our sessions, says the server) or `timeout` (cancelled)."""
        assert self.monitor is not None
        others = [pid for name, pid in self.pids.items() if name != session]
        deadline = time.monotonic() + STEP_TIMEOUT_S
        while True:
            done, _ = await asyncio.wait({task}, timeout=BLOCK_POLL_S)
            if done:
                return "done"
            cur = await self.monitor.execute("SELECT pg_blocking_pids(%s)", (self.pids[session],))
            blockers = set((await cur.fetchone())[0])
            if blockers & set(others):
                return "blocked"
            if time.monotonic() > deadline:
                await self.conns[session].cancel_safe()
                await task
                return "timeout"

    def _check_spec_error(self, spec: Spec, result: StepResult) -> None:
        if result.sqlstate and result.sqlstate[:2] in _SPEC_ERROR_CLASSES:
            raise SpecError(f"{spec.path}:{result.step.line}: step {result.step.name} fails on the server: "
                            f"{result.error}")


class _Ownership:
    """Claims pending in each session's transaction, and those committed (owned)."""

    def __init__(self) -> None:
        self.pending: dict[str, list[tuple[object, int]]] = {}
        self.picked: dict[str, dict[str, list]] = {}
        """Per session, the last pick's columns as arrays (and `ids`, its first column)."""
        self.owned: dict[object, list[tuple[str, int]]] = {}

    def after(self, step: Step, result: StepResult, conn: psycopg.AsyncConnection) -> None:
        session = step.session
        if result.error is None and step.kind == "claim" and result.rows:
            shape = result.shape
            self.pending.setdefault(session, []).extend(
                (canonical(r[0], shape.key_is_int), attempt_of(r, shape.attempt_index)) for r in result.rows)
        elif result.error is None and step.kind == "pick":  # an empty pick picks nothing, as a worker's
            self.picked[session] = pick_params(tuple(result.columns), result.rows)
        if conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            # The transaction ended with this step: its claims count only if it committed
            # (an explicit COMMIT, or a claim run on its own in autocommit).
            claims = self.pending.pop(session, [])
            if result.error is None and result.status != "ROLLBACK":
                for job, attempt in claims:
                    self.owned.setdefault(job, []).append((session, attempt))


def _message(exc: psycopg.Error) -> str:
    return (exc.diag.message_primary or str(exc)).strip()
