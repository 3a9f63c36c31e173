"""What a claim cycle asks of the database: the backend seam, and its psycopg backend.

The cycles (:mod:`pg_claimcheck.engine.cycle`) own the order of a claim's bookkeeping, which the
ledger's verdict depends on; a backend owns how a statement reaches the server. The protocol is what
the cycles call and nothing more: the claim, the completion of each of its jobs, a per-job section,
the explicit transaction, and telling a lost connection from a server error and reconnecting. Three
implement it: :class:`PsycopgBackend` here (psycopg's general path: gevent-friendly, for Locust's
users, and through a pooler its StatelessConnection binds on the client and prepares nothing by
name), :class:`pg_claimcheck.engine.fastpath.LibpqBackend` (the fork driver's hot path), and the
in-memory queue of the unit tests (tests/memory_queue.py), against which the cycles' rules are
tested without a server.

Errors are psycopg's exception types whatever the backend: a server error carries its SQLSTATE (a
claim outcome, counted and retried), a lost connection is one `lost` says is (reconnected).
"""
from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

import psycopg
from psycopg import pq

from pg_claimcheck.contract.dialect import placeholders
from pg_claimcheck.contract.keys import number_of
from pg_claimcheck.contract.queries import QUERIES
from pg_claimcheck.contract.strategy import RUN_SECTIONS, execute_section, pick_params

if TYPE_CHECKING:  # the worker module builds the backends: it imports this one
    from pg_claimcheck.engine.worker import WorkerPlan

INJECTED_ERROR = "claimcheck: injected failure"
"""What a `fail` writes to last_error: a lost requeue is known committed by it (`job_state`)."""
_LOST_SQLSTATES = ("57P01", "57P02", "57P03")  # admin / crash shutdown, cannot connect now
JOB_COLUMNS = {"id": 0, "attempts": 1}
"""The per-job parameters, by their place in a (key, attempt) pair."""

Counted = tuple[list[int], list[float], "psycopg.Error | None"]
"""`complete_each`'s answer: the row count of each completion that ran, the clock as each returned
(when asked), and the error that stopped them (None: all ran)."""


def complete_one_by_one(change: Callable[[str, int, int], bool], jobs: list[tuple[int, int]],
                        clock: Callable[[], float] | None) -> Counted:
    """`complete_each` for a backend with no batched path: `change("complete", ...)` per job, in turn,
    `clock()` read as each returned (if given), stopping at the first error, which is returned with
    what ran before it."""
    counts, times = [], []
    try:
        for job, attempt in jobs:
            counts.append(int(change("complete", job, attempt)))
            if clock is not None:
                times.append(clock())
    except psycopg.Error as exc:
        return counts, times, exc
    return counts, times, None


class Stopping(Exception):
    """The run is stopping while this worker has no connection."""


class Backend(Protocol):
    """What a claim cycle runs its statements through (one connection's worth)."""

    backend_pid: int | None
    """The server backend that ran the last claim, through a pooler (None otherwise)."""
    conn: Any
    """The connection now (a reconnect replaces it): Locust's users anchor their clock on it between transactions."""

    def claim(self) -> list[tuple]:
        """Run the claim (and its pick); its rows, as values or libpq's text."""

    def complete_each(self, jobs: list[tuple[int, int]], claimed: list[tuple], plain: bool,
                      clock: Callable[[], float] | None = None) -> Counted:
        """`complete` for each (job, attempt) of one claim, in turn, one call for the claim (in
        autocommit each its own transaction). `claimed`: the claim's own rows; `plain`: they were
        read by the plain reading (a backend may bind them as they came)."""

    def change(self, section: str, job: int, attempt: int) -> bool:
        """Run a per-job section (`complete`, `fail`, `extend`, `after_commit`): did it change (or
        return) a row? A section of several statements is one transaction (in lock mode, the claim's;
        `after_commit`'s, none)."""

    def transaction(self) -> AbstractContextManager:
        """The explicit transaction: COMMIT at the end, ROLLBACK on an exception."""

    def lost(self, exc: psycopg.Error) -> bool:
        """Is this error the connection going away (reconnect) rather than the server's answer?"""

    def heard(self) -> None:
        """After a pause in a transaction (work time): read what the server sent meanwhile, so that a
        session it ended is known by the FATAL it sent (`ended_by`), not only as a broken connection."""

    def reconnect(self) -> None:
        """Close what is left of the connection and open a new one (raises Stopping if the run ends meanwhile)."""

    def remaining(self) -> int:
        """The drain check: are jobs left (a count, or a truth value)?"""

    def server_now(self) -> float:
        """The server's clock (epoch seconds), read right after a claim that returned leases."""

    def job_state(self, job: int) -> tuple | None:
        """(status, attempts, last_error) of a job of our own jobs table, after a lost completion."""

    def close(self) -> None:
        """Close the connection, if still open."""


class Keys:
    """A job number as a statement's parameter: the number itself, or the seeded key it stands for."""

    def __init__(self, plan: WorkerPlan, unknown_keys: dict) -> None:
        self.keys, self.unknown_keys = plan.keys, unknown_keys  # the log's: filled as claims are kept
        self.numbered = plan.keys is None or plan.keys.keys is None
        """Keys are the ledger's numbers themselves (our jobs table, or a contiguous integer range)."""

    def shown(self, job: int) -> object:
        return job if self.numbered else self.keys.shown(job, self.unknown_keys)

    def pairs(self, jobs: list[tuple[int, int]]) -> list[tuple[object, int]]:
        """(key as the server knows it, attempt) per claimed (job, attempt)."""
        return jobs if self.numbered else [(self.shown(job), attempt) for job, attempt in jobs]


class Carried:
    """The claim's columns a job carries to its per-job sections (`ClaimShape.carried`: a fencing token,
    a claim id), kept by job number for the jobs of the last claim. A backend has one only for a claim
    with such columns (else None: its per-job paths test it with no call of ours)."""

    def __init__(self, plan: WorkerPlan) -> None:
        self.shape, self.keys = plan.shape, plan.keys
        self.columns = [i for _, i in plan.shape.carried]
        self.names = [name for name, _ in plan.shape.carried]
        self.values: dict[int, tuple] = {}

    def keep(self, rows: list[tuple]) -> None:
        """Note the carried values of a claim's rows (a row whose key is NULL is the reader's to refuse)."""
        key_is_int, keys, columns = self.shape.key_is_int, self.keys, self.columns
        self.values = {number_of(row[0], keys, key_is_int): tuple(row[i] for i in columns)
                       for row in rows if row[0] is not None}

    def of(self, job: int) -> dict[str, Any]:
        """The values job `job`'s claim returned, by column name (NULL for a job of no claim of ours)."""
        return dict(zip(self.names, self.values.get(job, (None,) * len(self.names))))


def as_text(value: object) -> bytes | None:
    """A value psycopg read, as libpq's text parameter: NULL stays NULL, a boolean as PostgreSQL spells it."""
    if value is None:
        return None
    if isinstance(value, bool):
        return b"true" if value else b"false"
    return str(value).encode()


def section_params(plan: WorkerPlan, worker: str) -> dict[str, dict]:
    """The fixed parameters of each run section; the claim's pick columns and a job's id and attempt
    are added per claim and per job."""
    s = plan.settings
    values = {"worker": worker, "batch": s.batch, "lease_seconds": s.lease_seconds, "ids": [], "id": 0,
              "attempts": 0, "error": INJECTED_ERROR, "backoff_unit_s": s.backoff_unit_s,
              "backoff_cap_s": s.backoff_cap_s}
    return {section: {k: values[k] for k in placeholders(text) if k in values}
            for section, text in plan.strategy.statements.items() if section in RUN_SECTIONS}


class PsycopgBackend:
    """Every statement through psycopg's `execute`: its waits yield to gevent's other greenlets (a
    Locust user's), and through a pooler its StatelessConnection sends each one whole, parameters
    bound on the client, nothing prepared by name (see pg_claimcheck.server.runcontext)."""

    def __init__(self, plan: WorkerPlan, worker: str, conn: psycopg.Connection, unknown_keys: dict,
                 connect: Callable[[], psycopg.Connection]) -> None:
        self.strategy, self.shape, self.connect = plan.strategy, plan.shape, connect
        self.params = section_params(plan, worker)
        self.keys = Keys(plan, unknown_keys)
        self.carried = Carried(plan) if plan.shape.carried else None
        self.drain_query = QUERIES["unfinished_remaining" if plan.settings.lifecycle else "queued_remaining"]
        """Our jobs table's drain check; a file with its own tables has its `remaining` section."""
        self.conn = conn
        self.stateless = plan.run.topology.stateless(worker=True)
        """Through a pooler (the run's topology): nothing is prepared by name (Topology.prepares), and the
        backend of each claim is recorded (its StatelessConnection records it per statement)."""
        self.backend_pid: int | None = None
        self._connected()

    def _connected(self) -> None:
        """Set up what belongs to one connection (again after each reconnect)."""
        self.ended_by: str | None = None
        """The SQLSTATE of the FATAL the server sent as it ended this session (25P03: its
        idle_in_transaction_session_timeout), once read; libpq reports the broken connection without it."""
        self.conn.add_notice_handler(self._ended)

    def _ended(self, diag) -> None:
        if diag.severity_nonlocalized == "FATAL" or diag.severity == "FATAL":
            self.ended_by = diag.sqlstate

    def heard(self) -> None:
        try:
            self.conn.pgconn.consume_input()  # a FATAL read now reaches _ended with the next statement
        except psycopg.Error:
            pass

    def claim(self) -> list[tuple]:
        params = self.params["claim"]
        if self.strategy.has_pick:
            picked = execute_section(self.conn, self.strategy, "pick", self.params["pick"]).fetchall()
            if not picked:
                return []
            params = {**params, **pick_params(self.shape.pick_columns, picked)}
        rows = execute_section(self.conn, self.strategy, "claim", params).fetchall()
        self._ran_claim()
        if self.carried:
            self.carried.keep(rows)
        return rows

    def _ran_claim(self) -> None:
        if self.stateless:  # the backend that ran the claim
            self.backend_pid = self.conn.backend_pid

    def complete_each(self, jobs: list[tuple[int, int]], claimed: list[tuple], plain: bool,
                      clock: Callable[[], float] | None = None) -> Counted:
        return complete_one_by_one(self.change, jobs, clock)

    def change(self, section: str, job: int, attempt: int) -> bool:
        params = self.params[section]
        params = {**params, **{k: v for k, v in (("id", self.keys.shown(job)), ("attempts", attempt)) if k in params}}
        if self.carried:
            params.update(self.carried.of(job))  # execute_section binds only the names a statement uses
        # after_commit follows a commit: its statements run as they are, in no transaction of ours.
        if (section == "after_commit" or len(self.strategy.steps(section)) == 1
                or self.conn.info.transaction_status != pq.TransactionStatus.IDLE):
            return execute_section(self.conn, self.strategy, section, params).rowcount > 0
        with self.transaction():
            return execute_section(self.conn, self.strategy, section, params).rowcount > 0

    def transaction(self) -> AbstractContextManager:
        return self.conn.transaction()

    def lost(self, exc: psycopg.Error) -> bool:
        """Not every OperationalError is a lost connection: NOWAIT's 55P03 is one, raised by a healthy
        connection. libpq reports a dead connection without an SQLSTATE, so ask it too."""
        if self.conn.closed or self.conn.pgconn.status == pq.ConnStatus.BAD:
            return True
        state = exc.sqlstate
        if state is None:
            return isinstance(exc, psycopg.OperationalError)
        return state.startswith("08") or state in _LOST_SQLSTATES

    def reconnect(self) -> None:
        self.close()
        self.conn = self.connect()
        self._connected()

    def remaining(self) -> int:
        if self.strategy.has("remaining"):  # a file's `remaining` section may hold several statements
            return execute_section(self.conn, self.strategy, "remaining", {}).fetchone()[0]
        return self.conn.execute(self.drain_query).fetchone()[0]

    def server_now(self) -> float:
        return self.conn.execute(QUERIES["server_clock"]).fetchone()[0]

    def job_state(self, job: int) -> tuple | None:
        return self.conn.execute(QUERIES["job_state"], {"id": job}).fetchone()

    def close(self) -> None:
        try:
            if not self.conn.closed:
                self.conn.close()
        except Exception:
            pass

