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
returning a lease keeps psycopg's general path.
"""
from __future__ import annotations

from collections.abc import Callable

import psycopg
from psycopg import errors, pq

from claimcheck.dialect import to_positional

_OK = (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK)


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

    def binder(self, fixed: dict, varying: tuple[str, ...]) -> Callable[..., list[bytes]]:
        """`bind` for a statement run once per job: the parameters in `fixed` are encoded once, here;
        the function returned takes the values of `varying`, in that order. (Per job, the worker's
        Python is the client's cost that pgbench does not pay: see tests/benchmarks/pgbench_parity.py.)"""
        template = [None if p in varying else str(fixed[p]).encode() for p in self.params]
        slots = tuple((i, varying.index(p)) for i, p in enumerate(self.params) if p in varying)

        def bind(*values: object) -> list[bytes]:
            bound = template.copy()
            for i, k in slots:
                bound[i] = str(values[k]).encode()
            return bound

        return bind

    def rowcount(self, bound: list[bytes]) -> int:
        """Execute with the bound parameters; the number of rows it changed."""
        return self._execute(bound).command_tuples or 0

    def rows(self, bound: list[bytes]) -> list[tuple]:
        """Execute a claim: its rows, each value as libpq's text (bytes), None for NULL. The worker
        reads the key, the attempt and any named column from them as its general path does."""
        result = self._execute(bound)
        get, width = result.get_value, result.nfields
        if width == 2:  # the common claim: key and attempt
            return [(get(i, 0), get(i, 1)) for i in range(result.ntuples)]
        return [tuple(get(i, c) for c in range(width)) for i in range(result.ntuples)]

    def _execute(self, bound: list[bytes]) -> pq.abc.PGresult:
        result = self.pgconn.exec_prepared(self.name, bound)
        if result.status not in _OK:
            _check(result, self.encoding)
        return result


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

    def __enter__(self) -> Transaction:
        self._command(b"BEGIN")
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
