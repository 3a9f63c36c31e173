"""A statement prepared once through libpq and run with text parameters: the worker's hot path.

Why: on a CPU-starved machine (2 cores shared by 8+ workers, their backends and anything else)
the client's CPU per statement is taken from the server. psycopg's general `execute` (a cursor,
query conversion, parameter adaptation, result bookkeeping) costs ~40-60 us of CPU per call here;
libpq's `PQexecPrepared` with the values already as text costs ~15 us, closer to pgbench's C
client. The statement, its transaction (autocommit: one implicit transaction per execution),
its round trip, its rows and its row count are exactly those of `conn.execute(statement, params)`.
Used for a lone claim statement and its per-job completions, in lease mode (autocommit) and in lock
mode, where :class:`Transaction` sends the BEGIN / COMMIT / ROLLBACK that psycopg's
`conn.transaction()` sends, through libpq too. A pick, a claim of several statements or a claim
returning a lease keeps psycopg's general path. :class:`LibpqBackend` is the claim cycles' backend
(see pg_claimcheck.engine.backend) built of these: the fork driver's workers use it.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import repeat
from operator import add, itemgetter

import psycopg
from psycopg import errors, pq

from pg_claimcheck.contract.dialect import substitute, to_positional
from pg_claimcheck.engine.backend import JOB_COLUMNS, Counted, PsycopgBackend, as_text
from pg_claimcheck.server.runcontext import StatelessConnection

_OK = frozenset(int(status) for status in (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK))
"""As plain ints: libpq's status is an int, and a set of ints answers `in` without comparing enums."""


def _check(result: pq.abc.PGresult, encoding: str) -> None:
    if result.status not in _OK:
        # The same exception types as psycopg raises, so SerializationFailure and
        # DeadlockDetected are retried by the worker exactly as before.
        raise errors.error_from_result(result, encoding=encoding)


class PreparedStatement:
    """One server-side prepared statement on one connection, executed by libpq directly."""

    def __init__(self, conn: psycopg.Connection, name: str, statement: str) -> None:
        self.pgconn = conn.pgconn
        self.name = name.encode()
        self.encoding = conn.info.encoding
        text, self.params = to_positional(statement)
        # Parameter types are inferred by the server from the statement, as for psycopg's
        # prepared statements; a statement where that fails raises here, before the run.
        _check(self.pgconn.prepare(self.name, text.encode(), None), self.encoding)

    def bind(self, values: dict) -> list[bytes]:
        """The parameters as libpq takes them: text, in `$n` order. Bind once what does not change."""
        return [str(values[p]).encode() for p in self.params]

    def binder(self, fixed: dict, columns: dict[str, int], width: int) -> Binder:
        """`bind` for a statement run once per claimed job, from rows `width` wide: see :class:`Binder`."""
        return Binder(self.params, fixed, columns, width)

    def rowcount(self, bound: Sequence[bytes]) -> int:
        """Execute with the bound parameters; the number of rows it changed."""
        return self._execute(bound).command_tuples or 0

    def rowcount_each(self, bounds: Sequence[Sequence[bytes]], clock: Callable[[], float] | None = None
                      ) -> tuple[list[int], list[float], psycopg.Error | None]:
        """`rowcount` for each of `bounds` in turn, one round trip each (in autocommit, each its own
        transaction): the row counts, `clock()` read as each returned (if given), and the error that
        stopped the loop, or None. What ran before an error is returned with it, so the caller can
        record those and hand on the rest.

        Why one call for all of a claim's jobs: with 16 workers sharing 2 cores, a worker resumes on a
        cold cache after every round trip, and there each Python call per job costs far more than its
        instructions. Four calls per job cost about 10 us of CPU per job at 16 workers, a tenth of the
        way to pgbench's throughput (tests/benchmarks/pgbench_parity.py, python_floor.py)."""
        execute, name, counts, times = self.pgconn.exec_prepared, self.name, [], []
        try:
            for bound in bounds:
                result = execute(name, bound)
                if result.status not in _OK:
                    _check(result, self.encoding)
                counts.append(result.command_tuples or 0)
                if clock is not None:
                    times.append(clock())
        except psycopg.Error as exc:
            return counts, times, exc
        return counts, times, None

    def rows(self, bound: Sequence[bytes]) -> list[tuple]:
        """Execute a claim: its rows, each value as libpq's text (bytes), None for NULL. The worker
        reads the key, the attempt and any named column from them as its general path does."""
        result = self._execute(bound)
        get, rows = result.get_value, range(result.ntuples)
        # Column by column, by `map` over libpq's getter: no Python bytecode per row.
        return list(zip(*[map(get, rows, repeat(column)) for column in range(result.nfields)]))

    def _execute(self, bound: Sequence[bytes]) -> pq.abc.PGresult:
        result = self.pgconn.exec_prepared(self.name, bound)
        if result.status not in _OK:
            _check(result, self.encoding)
        return result


class InlineStatement(PreparedStatement):
    """A PreparedStatement's interface for a connection through a pooler (see
    pg_claimcheck.server.runcontext.StatelessConnection), where nothing may be prepared by name: each
    execution is one simple-protocol message, the connection's prelude (isolation, search path) and
    the statement with each parameter as a quoted literal (libpq's PQescapeLiteral: right whatever
    the session's standard_conforming_strings, and no slower than quoting by hand). A quoted literal
    is of unknown type until its context types it, as an untyped parameter is. Records the backend that ran it on the
    connection (`backend_pid`), as the connection's own cursors do."""

    def __init__(self, conn: psycopg.Connection, statement: str) -> None:
        self.conn, self.pgconn, self.encoding = conn, conn.pgconn, conn.info.encoding
        self.quote = pq.Escaping(conn.pgconn).escape_literal
        _, self.params = to_positional(statement)
        # The text between `%(name)s` placeholders, read as psycopg reads them (split at a NUL, which no
        # statement text holds), and the parameter that goes after each piece.
        self.slots: list[int] = []

        def mark(name: str) -> str:
            self.slots.append(self.params.index(name))
            return "\x00"

        self.pieces = [piece.encode(self.encoding) for piece in substitute(statement, mark).split("\x00")]

    def rowcount_each(self, bounds: Sequence[Sequence[bytes]], clock: Callable[[], float] | None = None
                      ) -> tuple[list[int], list[float], psycopg.Error | None]:
        """As PreparedStatement's, one message each."""
        counts, times = [], []
        try:
            for bound in bounds:
                counts.append(self._execute(bound).command_tuples or 0)
                if clock is not None:
                    times.append(clock())
        except psycopg.Error as exc:
            return counts, times, exc
        return counts, times, None

    def _execute(self, bound: Sequence[bytes]) -> pq.abc.PGresult:
        count, prefix = self.conn.prelude_prefix()  # none inside an explicit transaction (its BEGIN set it)
        parts, quote = [prefix, self.pieces[0]], self.quote
        for slot, piece in zip(self.slots, self.pieces[1:]):
            parts += (quote(bound[slot]), piece)
        self.pgconn.send_query(b"".join(parts))
        results, pgconn = [], self.pgconn
        while (result := pgconn.get_result()) is not None:
            results.append(result)
        for result in results:
            if result.status not in _OK:
                _check(result, self.encoding)
        if count and self.conn.schema is not None:
            self.conn.backend_pid = int(results[count - 1].get_value(0, 1))
        return results[-1]


class Binder:
    """Parameters for a statement run once per claimed job (one call per claim, not per job: see
    `PreparedStatement.rowcount_each`). The parameter named in `columns` is that column of the job's
    row, the others are `fixed` (encoded once, here).

    A row is libpq's text, as a claim through the fast path returns it (`__call__`): it goes back to
    the server as it came, bound by `map` over C functions with no Python bytecode per job. Only for
    columns whose text is the value's own (integer keys and attempts), where it is what encoding
    the number read would send. Otherwise a row is a (key, attempt) pair of values (`pairs`)."""

    def __init__(self, params: tuple[str, ...], fixed: dict, columns: dict[str, int], width: int) -> None:
        constants = [p for p in dict.fromkeys(params) if p not in columns]
        self.fixed = tuple(str(fixed[p]).encode() for p in constants)
        # Each parameter's place in (row + self.fixed): its column, or after the row's `width` values.
        places = [columns[p] if p in columns else width + constants.index(p) for p in params]
        pick = itemgetter(*places) if places else (lambda _: ())
        self.pick = pick if len(places) != 1 else (lambda source: (pick(source),))

    def __call__(self, rows: Sequence[tuple]) -> list[tuple]:
        """One parameter tuple per row of libpq text."""
        if self.fixed:
            return list(map(self.pick, map(add, rows, repeat(self.fixed, len(rows)))))
        return list(map(self.pick, rows))

    def pairs(self, rows: Sequence[tuple[object, object]]) -> list[tuple]:
        """One parameter tuple per (key, attempt) pair of values (numbers, keys), each sent as its
        `str`: for a binder of rows 2 wide. (Encoding a pair in one expression is about 2.5 times as
        fast, per claim, as encoding a row of any width value by value.)"""
        return self([(str(key).encode(), str(attempt).encode()) for key, attempt in rows])


class Transaction:
    """`with Transaction(conn):` the explicit transaction of `with conn.transaction():` on an
    autocommit connection, through libpq: the same commands (BEGIN; COMMIT, or ROLLBACK on an
    exception), one round trip each, the same exception types.

    Two differences, both on psycopg's bookkeeping only: psycopg's rollback also empties its cache
    of prepared statements and sends DEALLOCATE ALL, which would drop this module's statements
    (prepared once per connection) and costs a round trip per failed claim; here nothing is
    deallocated (prepared statements outlive a rollback on the server, so psycopg's cache stays true).
    And an error during the rollback is swallowed without psycopg's logged warning.
    """

    def __init__(self, conn: psycopg.Connection) -> None:
        self.pgconn = conn.pgconn
        self.encoding = conn.info.encoding
        # Through a pooler (see pg_claimcheck.server.runcontext), the BEGIN message also sets the isolation
        # level (the backend's session default is not ours to set) and the search path, once for the
        # whole transaction, and returns the backend that runs it: the connection's own prelude.
        stateless = isinstance(conn, StatelessConnection)
        self.begin = conn.begin() if stateless else b"BEGIN"
        self.records_backend = conn if stateless and conn.schema is not None else None

    def __enter__(self) -> Transaction:
        result = self.pgconn.exec_(self.begin)
        _check(result, self.encoding)
        if self.records_backend is not None:
            self.records_backend.backend_pid = int(result.get_value(0, 1))
        return self

    def __exit__(self, exc_type: type | None, exc: BaseException | None, tb: object) -> bool:
        if exc is None:
            self._command(b"COMMIT")
        elif self.pgconn.status == pq.ConnStatus.OK:
            # As psycopg: roll back what the error left open, unless the connection is broken
            # (then the server has rolled it back), and never hide the error that got us here.
            try:
                self._command(b"ROLLBACK")
            except Exception:
                pass
        return False

    def _command(self, command: bytes) -> None:
        _check(self.pgconn.exec_(command), self.encoding)


class LibpqBackend(PsycopgBackend):
    """The hot path as a claim cycle's backend: a lone claim statement and a lone `complete` through
    libpq (prepared by name on each new connection, or inline through a pooler), the explicit
    transaction through :class:`Transaction` (lock mode's, and a per-job section's of several
    statements). What is not eligible (a pick, a claim of several statements or one returning a lease,
    `fail`, `extend`, `after_commit`, the drain check) keeps psycopg's general path."""

    def _connected(self) -> None:
        super()._connected()
        strategy, shape = self.strategy, self.shape
        self.tx = Transaction(self.conn)  # one per connection; through a pooler, each BEGIN sets the isolation
        single = lambda section: strategy.has(section) and len(strategy.steps(section)) == 1  # noqa: E731
        self.fast_complete = self._prepare("complete") if single("complete") else None
        carried = {name: 2 + i for i, name in enumerate(self.carried.names)} if self.carried else {}
        self.bind_complete = self.fast_complete.binder(self.params["complete"], {**JOB_COLUMNS, **carried},
                                                       2 + len(carried)) if self.fast_complete else None
        """Binds (key, attempt) pairs of values: the numbers read, or the keys they stand for (and, for
        a claim whose jobs carry columns, their values: `_carrying`)."""
        # A claim returning its lease reads the server's clock right after it: the general path.
        # A claim whose columns its jobs carry (ClaimShape.carried) keeps psycopg's values for them.
        plain = shape.lease_index is None and not strategy.has_pick and not shape.carried
        self.fast_claim = self._prepare("claim") if plain and single("claim") else None
        self.fast_claim_params = self.fast_claim.bind(self.params["claim"]) if self.fast_claim else []
        # A fast claim's rows are libpq's text. Where they are integer keys numbering the jobs themselves
        # and integer attempts, each completion takes them from the claim's row as they came.
        echo = (self.fast_complete and self.fast_claim and self.keys.numbered and shape.key_is_int
                and shape.attempt_index is not None and shape.max_attempts_index is None and shape.attempt_is_int)
        self.bind_claimed = self.fast_complete.binder(
            self.params["complete"], {**JOB_COLUMNS, "attempts": shape.attempt_index}, len(shape.columns)
        ) if echo else None
        """Binds a claim read by the plain reading (its notes say so); else `bind_complete` binds the
        numbers read (a NULL attempt is bound as 0, as the ledger reads it)."""

    def _prepare(self, section: str) -> PreparedStatement | None:
        """The section's statement prepared on libpq's fast path, or None for psycopg's general path.
        Through a pooler nothing is prepared by name: the statement is sent whole each time, its
        parameters inline (see InlineStatement)."""
        text = self.strategy.statements[section]
        if self.stateless:
            return InlineStatement(self.conn, text)
        try:
            return PreparedStatement(self.conn, f"claimcheck_{section}", text)
        except psycopg.Error:
            # The server could not infer a parameter's type without psycopg's hints (validation
            # passed with them): keep the general path for this strategy.
            return None

    def claim(self) -> list[tuple]:
        if self.fast_claim is None:
            return super().claim()
        rows = self.fast_claim.rows(self.fast_claim_params)
        if self.stateless:
            self.backend_pid = self.conn.backend_pid
        return rows

    def complete_each(self, jobs: list[tuple[int, int]], claimed: list[tuple], plain: bool,
                      clock: Callable[[], float] | None = None) -> Counted:
        if self.fast_complete is None:
            return super().complete_each(jobs, claimed, plain, clock)
        if self.bind_claimed is not None and plain:
            bound = self.bind_claimed(claimed)
        elif self.carried:
            bound = self.bind_complete(self._carrying(jobs))
        else:
            bound = self.bind_complete.pairs(self.keys.pairs(jobs))
        return self.fast_complete.rowcount_each(bound, clock)

    def change(self, section: str, job: int, attempt: int) -> bool:
        if section == "complete" and self.fast_complete is not None:
            # The job's parameters bound as text straight to libpq.
            if self.carried:
                return self.fast_complete.rowcount(self.bind_complete(self._carrying([(job, attempt)]))[0]) > 0
            return self.fast_complete.rowcount(self.bind_complete.pairs([(self.keys.shown(job), attempt)])[0]) > 0
        return super().change(section, job, attempt)

    def _carrying(self, jobs: list[tuple[int, int]]) -> list[tuple]:
        """(key, attempt, carried values...) per job as libpq's text, for `bind_complete`."""
        assert self.carried is not None  # called only for a claim whose jobs carry columns
        values = self.carried.values
        missing = (None,) * len(self.carried.names)
        return [(str(self.keys.shown(job)).encode(), str(attempt).encode(),
                 *map(as_text, values.get(job, missing))) for job, attempt in jobs]

    def transaction(self) -> Transaction:
        """psycopg's `conn.transaction()` without its DEALLOCATE ALL on a rollback, which would drop the
        prepared statements. psycopg's own prepared statements outlive the ROLLBACK as well (they are
        not transactional)."""
        return self.tx
