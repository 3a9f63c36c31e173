"""Where a run's connections are made and named: one home for the run id, its schema and its DSN.

Every connection of a run is named `claimcheck/<run id>/<role>` in `pg_stat_activity` (roles:
`coordinator`, `w07`, `sampler`, `reaper`, `monitor`, `s-<session>`, `vacuum-worker`, ...), and
works inside the run's schema. The queries that look for a run's backends (the sampler, the
fault injector, cleanup) match :meth:`RunContext.app_pattern`, so naming and matching cannot drift.

Behind a connection pooler (see pg_claimcheck.server.pooling) a connection may reach a different
backend in each transaction, so it must keep no session state: a connection made through one is
a :class:`StatelessConnection`, whose every statement carries its own search path (and, for a
worker, isolation level) in the same implicit transaction, with no named prepared statement.
Behind statement pooling it sends no BEGIN either: a transaction that commits goes in one message
(:func:`in_one_transaction`), one rolled back is replayed (:meth:`StatelessConnection.transaction`). Whether
the run's connections go through a pooler, and where workers connect instead (a PgBouncer we started
in front of the server), is the run's `Topology` (pg_claimcheck.server.topology), decided once when the
server is provided (pg_claimcheck.server.provision) and carried on the server and on the run's context:
a connection is made as the topology says, and code that holds the run asks the topology what its
connections can do.
"""
from __future__ import annotations

import re
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator, TypeVar

import psycopg
from psycopg import pq, sql

from pg_claimcheck.errors import UsageError
from pg_claimcheck.server.topology import DIRECT, REFUSES_BLOCKS, Topology

APP_PREFIX = "claimcheck/"
MAX_APP_NAME = 63  # PostgreSQL truncates application_name to NAMEDATALEN - 1 bytes
CONNECT_TIMEOUT_S = 10
RECONNECT_PAUSE_S = 0.2
SCHEMA_PREFIX = "claimcheck_"


def schema_name(run_id: str) -> str:
    return f"{SCHEMA_PREFIX}{run_id}"


def app_pattern(run_id: str) -> str:
    """A LIKE pattern for the application_name of every connection of a run (run ids are
    [a-z0-9_], so `_` is the only character LIKE would read as a wildcard)."""
    return f"{APP_PREFIX}{run_id}/".replace("_", r"\_") + "%"


_T = TypeVar("_T")


def when_up(connect: Callable[[], _T], wait_s: float, *, pause_s: float = RECONNECT_PAUSE_S,
            give_up: Callable[[], None] | None = None) -> _T:
    """`connect()`, tried again every `pause_s` while the server cannot take connections (a restart
    under way), for up to `wait_s`: the one reconnect loop of a run's connections. `give_up` is asked
    after each failure and raises to end the wait early (the run is stopping)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return connect()
        except psycopg.OperationalError:
            if give_up is not None:
                give_up()
            if time.monotonic() > deadline:
                raise
            time.sleep(pause_s)


@dataclass(frozen=True)
class RunContext:
    """One run on one server: what every connection of it needs."""

    dsn: str
    run_id: str
    topology: Topology = DIRECT
    """How its connections reach the server (the provided server's `topology`)."""

    @property
    def schema(self) -> str:
        return schema_name(self.run_id)

    @property
    def app_prefix(self) -> str:
        """Every connection's application_name starts with this."""
        return f"{APP_PREFIX}{self.run_id}/"

    def app_name(self, role: str) -> str:
        return f"{self.app_prefix}{role}"[:MAX_APP_NAME]

    def role_dsn(self, role: str, *, worker: bool = False) -> str:
        """This run's DSN with `role`'s name, for a program that connects from a DSN string (a
        queue library's own code); a `worker`'s goes through the workers' pooler, if any."""
        return psycopg.conninfo.make_conninfo(self._target(worker), application_name=self.app_name(role))

    def _target(self, worker: bool) -> str:
        """The DSN a connection uses: the workers' pooler's (in this DSN's database) for a worker."""
        via = self.topology.workers
        if worker and via is not None:
            return psycopg.conninfo.make_conninfo(via, dbname=psycopg.conninfo.conninfo_to_dict(self.dsn).get("dbname"))
        return self.dsn

    def app_pattern(self) -> str:
        return app_pattern(self.run_id)

    def _options(self, role: str) -> dict:
        return {"autocommit": True, "application_name": self.app_name(role), "connect_timeout": CONNECT_TIMEOUT_S}

    def connect(self, role: str, *, in_schema: bool = True, worker: bool = False,
                isolation: str | None = None) -> psycopg.Connection:
        """An autocommit connection named for `role`, in the run's schema unless `in_schema` is False
        (the schema may not exist yet, or may be gone). A `worker`'s goes through the workers' pooler,
        if any; through a pooler, each of its transactions gets the search path (and `isolation`)
        itself, and `isolation` is not set for the session."""
        if self.topology.stateless(worker=worker):
            pooled = StatelessConnection.connect(self._target(worker), prepare_threshold=None, **self._options(role))
            pooled.schema, pooled.isolation = (self.schema if in_schema else None), isolation
            pooled.refuses_blocks = not self.topology.opens_blocks(worker=worker)
            return pooled
        conn = psycopg.connect(self.dsn, **self._options(role))
        if in_schema:
            try:
                use_schema(conn, self.schema)
            except BaseException:
                conn.close()
                raise
        return conn

    def reconnected(self, conn: psycopg.Connection, role: str = "coordinator", *, in_schema: bool = True,
                    wait_s: float = 0.0) -> psycopg.Connection:
        """`conn` if it still answers, else a new connection for `role` (a restart fault closed it);
        waits up to `wait_s` for a restarting server to take connections again."""
        try:
            conn.execute("SELECT 1")
            return conn
        except psycopg.OperationalError:
            conn.close()
        return when_up(lambda: self.connect(role, in_schema=in_schema), wait_s)

    async def connect_async(self, role: str) -> psycopg.AsyncConnection:
        conn = await psycopg.AsyncConnection.connect(self.dsn, **self._options(role))
        try:
            await conn.execute(_set_search_path(self.schema))
        except BaseException:
            await conn.close()
            raise
        return conn


def use_schema(conn: psycopg.Connection, schema: str) -> None:
    """Work inside `schema` on this connection (the run's tables, found by name)."""
    if isinstance(conn, StatelessConnection):
        conn.schema = schema  # each transaction sets it: the session may be another client's next
        return
    conn.execute(_set_search_path(schema))


_SEARCH_PATH = sql.SQL("SELECT pg_catalog.set_config('search_path', {}, true), pg_catalog.pg_backend_pid()")


_ALONE = re.compile(r"(\s*--[^\n]*\n)*\s*(VACUUM|(CREATE|DROP|ALTER)\s+DATABASE|CREATE\s+INDEX\s+CONCURRENTLY"
                    r"|REINDEX\s+.*CONCURRENTLY)\b", re.I | re.S)
"""Statements PostgreSQL runs only outside a transaction block, so with no prelude in their message:
they must name their tables with the schema."""


class StatelessCursor(psycopg.ClientCursor):
    """Sends each statement in one simple-protocol message (one round trip, one implicit transaction
    unless an explicit one is open) behind the connection's prelude: SET TRANSACTION ISOLATION LEVEL
    and `set_config('search_path', schema, true)`, which ends with the transaction; inside an explicit
    transaction, alone (its start set both). Never prepared by name: a pooler may hand the next transaction to a backend that
    has a statement of that name, or lacks it. Records the backend that ran it (`conn.backend_pid`).

    Why one message and client-side binding: the statement and its prelude must share a transaction,
    and a parameterised statement cannot share a message with another in the extended protocol
    outside pipeline mode, whose bookkeeping cost here about twice the statement's own round trip (a
    claim's ten completions are ten statements). The parameters are bound as psycopg's
    ClientCursor binds them: literals, typed as such."""

    def execute(self, query, params=None, *, prepare=None, binary=None):  # noqa: D102 (psycopg's signature)
        conn = self.connection
        if conn.replayed is not None:
            return self._replay(query, params)
        prelude = conn.prelude()
        if not prelude or _ALONE.match(query if isinstance(query, str) else query.as_string(conn)):
            return super().execute(query, params, prepare=False)
        super().execute("; ".join([*prelude, self.mogrify(query, params)]), prepare=False)
        for _ in range(len(prelude) - 1):
            self.nextset()
        if conn.schema is not None:
            conn.backend_pid = self.fetchone()[1]
        self.nextset()  # the statement's own result, as if it had been sent alone
        return self

    def executemany(self, query, params_seq, *, returning=False):  # noqa: D102
        for params in params_seq:  # each its own statement, as in autocommit they are anyway
            self.execute(query, params)

    def _replay(self, query, params) -> "StatelessCursor":
        """A statement of a rolled-back transaction behind statement pooling: one message that runs the
        transaction's earlier statements again, then this one, and rolls back (see
        StatelessConnection.transaction); the cursor holds this statement's result.

        No BEGIN: the message is one implicit transaction, which its closing ROLLBACK ends (with the
        server's warning that no transaction is in progress). A failing statement ends it too, and the
        pooler then keeps the connection: after an explicit block left failed, PgBouncer closes it with
        its own error (08P01), which may reach the client before the statement's."""
        conn = self.connection
        statement = self.mogrify(query, params)
        parts = [*conn.replay_prelude(), *conn.replayed, statement, "ROLLBACK"]
        try:
            super().execute(";\n".join(parts), prepare=False)
        except psycopg.Error as exc:  # its position counts from this statement's start (see server_message)
            exc.statement_offset = len(";\n".join(parts[:-2])) + len(";\n")
            raise
        for _ in range(len(parts) - 2):
            self.nextset()
        conn.replayed.append(statement)
        return self


_NO_PRELUDE: tuple[list[str], tuple[int, bytes]] = ([], (0, b""))


class StatelessConnection(psycopg.Connection):
    """A connection through a pooler: see StatelessCursor."""

    schema: str | None = None
    isolation: str | None = None
    settings: tuple[tuple[str, str], ...] = ()
    """Settings each transaction of ours starts with (`SET LOCAL`, after the isolation level): the
    session's settings, which a pooler's backend does not keep for us (Strategy.session)."""
    backend_pid: int | None = None
    """The backend that ran the last statement (behind a transaction pooler, it changes)."""
    refuses_blocks: bool = False
    """Behind statement pooling (Topology.opens_blocks, set when it connects): no BEGIN may reach the pooler
    on its own (see `transaction`)."""
    replayed: list[str] | None = None
    """Inside a rolled-back transaction behind statement pooling: its statements so far (SQL text)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.cursor_factory = StatelessCursor
        self._preludes: dict[tuple, tuple[list[str], tuple[int, bytes]]] = {}
        self._paths: dict[str, str] = {}

    def prelude(self) -> list[str]:
        """The statements that go before a statement outside an explicit transaction, in its message (SQL
        text): the isolation level, then the search path (which also returns the backend's pid); the last
        one, when there is a schema, is the search path's. None inside an explicit transaction: its start
        set both for all of it, on the one backend that runs it (see `begin`, `transaction`)."""
        return self._prelude()[0]

    def prelude_prefix(self) -> tuple[int, bytes]:
        """`prelude` as the start of a message, encoded once (each statement followed by `; `), and its
        number of statements."""
        return self._prelude()[1]

    def _prelude(self) -> tuple[list[str], tuple[int, bytes]]:
        if self.pgconn.transaction_status != pq.TransactionStatus.IDLE:
            return _NO_PRELUDE
        key = (self.schema, self.isolation, self.settings)
        cached = self._preludes.get(key)
        if cached is None:
            parts = self._opening(self.isolation)
            prefix = "".join(f"{part}; " for part in parts).encode(self.info.encoding)
            cached = self._preludes[key] = (parts, (len(parts), prefix))
        return cached

    def search_path(self) -> str:
        """The statement that sets the search path to the schema for the transaction and returns the
        backend's pid (SQL text, made once per schema)."""
        if self.schema not in self._paths:
            self._paths[self.schema] = _SEARCH_PATH.format(sql.Literal(self.schema)).as_string(self)
        return self._paths[self.schema]

    def _opening(self, level: str | None) -> list[str]:
        """What a transaction of ours starts with: the isolation `level` (if any), then the search path,
        which returns the backend's pid last (SQL texts)."""
        parts = [f"SET TRANSACTION ISOLATION LEVEL {level.upper()}"] if level else []
        parts += [sql.SQL("SET LOCAL {} = {}").format(sql.Identifier(*name.split(".")), sql.Literal(value)).as_string(self)
                  for name, value in self.settings]
        return parts + ([self.search_path()] if self.schema is not None else [])

    def begin(self) -> bytes:
        """The message that starts an explicit transaction: BEGIN, then the prelude an idle connection's
        statement gets (the isolation level, the search path, which returns the backend's pid last)."""
        return "; ".join(["BEGIN", *self._opening(self.isolation)]).encode(self.info.encoding)

    def replay_prelude(self) -> list[str]:
        """The statements that open a rolled-back transaction replayed behind statement pooling: the
        isolation level psycopg's BEGIN would name, then the search path."""
        level = self.isolation_level.name.replace("_", " ") if self.isolation_level is not None else self.isolation
        return self._opening(level)

    @contextmanager
    def transaction(self, savepoint_name: str | None = None,
                    force_rollback: bool = False) -> Iterator[psycopg.Transaction | None]:
        """psycopg's transaction, whose first statement sets the search path for all of it (and records
        its backend): a statement inside, which carries no prelude, or by a cursor of another kind (a
        ClientCursor, a stream) finds the run's tables.

        Behind statement pooling a BEGIN is refused (PgBouncer: 08P01, and it closes the connection),
        but a message of several statements is one implicit transaction, and allowed. A rolled-back
        transaction (`force_rollback`: a validation, an EXPLAIN) is then replayed: each statement goes
        in a message after the transaction's earlier ones, and a ROLLBACK after it, so it runs where they
        have run and nothing stays. One that commits and reads between statements has no such form:
        refused, saying why (see in_one_transaction for one that does not read)."""
        if self.refuses_blocks:
            if not force_rollback or savepoint_name is not None or self.replayed is not None:
                raise UsageError(f"this step needs a transaction block across statements, and {REFUSES_BLOCKS}: "
                                 "the pooler in front of --dsn is in statement mode. Point --dsn at the server, and "
                                 "put a statement pool in front of the workers only with --pooler pgbouncer:statement "
                                 "(docs/poolers.md)")
            self.replayed = []
            try:
                yield None
            finally:
                self.replayed = None
            return
        with super().transaction(savepoint_name, force_rollback) as tx:
            if self.schema is not None:
                cursor = psycopg.Cursor(self).execute(self.search_path(), prepare=False)
                self.backend_pid = cursor.fetchone()[1]  # its statements have no prelude: the backend is this one
            yield tx


def refuses_blocks(conn: psycopg.Connection) -> bool:
    """Is this a connection through a statement pool, where no BEGIN may be sent? For code that holds a
    connection and not its run (the run's code asks `run.topology.opens_blocks`)."""
    return isinstance(conn, StatelessConnection) and conn.refuses_blocks


def in_one_transaction(conn: psycopg.Connection, statements: list[tuple]) -> psycopg.Cursor:
    """Run `(query, params)` statements in one transaction that commits; the cursor holds the last one's
    result. Behind statement pooling (`refuses_blocks`) they go in one message, bound on the client,
    which the server runs as one implicit transaction: all of it or none, with no BEGIN."""
    if not refuses_blocks(conn):
        with conn.transaction():
            for query, params in statements:
                cursor = conn.execute(query, params)
        return cursor
    cursor = conn.cursor()
    # ";\n": a statement's last line may be a comment, which would swallow a "; " after it.
    cursor.execute(";\n".join(cursor.mogrify(q if isinstance(q, str) else q.as_string(conn), p)
                              for q, p in statements))
    while cursor.nextset():
        pass
    return cursor


ROLLED_BACK = "claimcheck: rolled back"
_ROLL_BACK = f"DO $$BEGIN RAISE EXCEPTION '{ROLLED_BACK}'; END$$"
"""Ends a message in an error of ours: its implicit transaction, all of it, is rolled back."""


def failing_statement(conn: psycopg.Connection, statements: list[str]) -> int:
    """Which of `statements` (SQL text) fails when they run in order, as one message did: each prefix is
    run again, one statement longer each time, in a message that ends in an error of ours (so nothing
    stays, and behind statement pooling the connection does too), until one fails by itself."""
    for index in range(len(statements)):
        try:
            conn.execute(";\n".join([*statements[:index + 1], _ROLL_BACK]))
        except psycopg.Error as exc:
            if (exc.diag.message_primary or "") != ROLLED_BACK:
                return index
    return len(statements) - 1  # none fails again alone: the last one is the best guess


def _set_search_path(schema: str) -> sql.Composed:
    return sql.SQL("SET search_path TO {}").format(sql.Identifier(schema))
