"""Is there a connection pooler between us and the server, and how does it pool? Found by behaviour.

A pooler is not told apart by its port or its name but by what it does to backends:

- **transaction pooling**: two client connections run their transactions on the same backend (the
  same `pg_backend_pid()`), or one client connection's backend changes between its transactions;
- **statement pooling**: as transaction pooling, and an explicit transaction block is refused
  (PgBouncer: SQLSTATE 08P01, "transaction blocks not allowed in statement pooling mode");
- **session pooling**: each client connection keeps one backend, but a new client connection gets
  the backend a closed one had (a direct server starts a new backend, a new pid, for each).

The result is shown in the report header (`postgres.pooler`) and is part of the run's topology
(pg_claimcheck.server.topology), which says what its connections can do and refuses what they cannot.
For a PgBouncer we started, the mode and pool size are known and not probed.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import psycopg

from pg_claimcheck.errors import ServerError
from pg_claimcheck.server.redaction import redact_dsn, scrub

CONNECT_TIMEOUT_S = 5
TRIES = 3
RELEASE_WAIT_S = 0.05
_PID = "SELECT pg_backend_pid()"


@dataclass(frozen=True)
class Pooler:
    """A pooler in front of the server: found in front of the DSN by its behaviour, or ours (`--pooler`)."""

    mode: str
    """transaction, session or statement."""
    started: bool
    """We started it (`--pooler`): only the workers connect through it. Else every connection does."""
    evidence: str
    """What showed it (for one we started: its configuration)."""
    kind: str = "unknown"
    """`pgbouncer` when we started it; a pooler found by its behaviour is not named."""
    version: str | None = None
    pool_size: int | None = None
    """Server connections in the pool, when known."""

    def as_dict(self) -> dict:
        return {"kind": self.kind, "mode": self.mode, "started_by_claimcheck": self.started,
                "version": self.version, "pool_size": self.pool_size, "evidence": self.evidence}

    def label(self) -> str:
        """One line for the header (see pooler_words)."""
        return pooler_words(self.as_dict())


def pooler_words(pooler: dict, detail: bool = True) -> str:
    """A pooler in words, from Pooler.as_dict() (a report's `postgres.pooler`), for the terminal's
    header and titles and the HTML report alike: "PgBouncer 1.18.0 in transaction mode, pool of 4
    (started by claimcheck for the workers)"; without `detail`, no parenthesis (a table's title)."""
    name = f"PgBouncer {pooler.get('version')}" if pooler.get("kind") == "pgbouncer" else "a pooler"
    size = f", pool of {pooler['pool_size']}" if pooler.get("pool_size") else ""
    who = ("started by claimcheck for the workers" if pooler.get("started_by_claimcheck")
           else f"found by behaviour: {pooler.get('evidence', '')}")
    return f"{name} in {pooler.get('mode')} mode{size}" + (f" ({who})" if detail else "")


def _connect(dsn: str) -> psycopg.Connection:
    return psycopg.connect(dsn, autocommit=True, prepare_threshold=None, connect_timeout=CONNECT_TIMEOUT_S,
                           application_name="claimcheck/pooler-probe")


def _pid(conn: psycopg.Connection) -> int:
    return conn.execute(_PID).fetchone()[0]


def detect(dsn: str) -> Pooler | None:
    """The pooler between us and the server at `dsn`, or None when we reach the server directly."""
    try:
        return _probe(dsn)
    except psycopg.Error as exc:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ServerError(f"{redact_dsn(dsn)}: the probe for a connection pooler (a few short connections) "
                          f"failed: {scrub(message)}") from None


def _probe(dsn: str) -> Pooler | None:
    with _connect(dsn) as a, _connect(dsn) as b:
        for _ in range(TRIES):
            first, other, again = _pid(a), _pid(b), _pid(a)
            if first == other or first != again:
                seen = (f"two client connections ran on backend {first}" if first == other
                        else f"one client connection ran on backends {first} and {again}")
                return Pooler(mode="statement" if _refuses_blocks(dsn) else "transaction", started=False,
                              evidence=seen)
        held = {first, other}
    for _ in range(TRIES):
        time.sleep(RELEASE_WAIT_S)  # the pooler takes back a closed client's backend asynchronously
        with _connect(dsn) as c:
            inherited = _pid(c)
        if inherited in held:
            return Pooler(mode="session", started=False,
                          evidence=f"a new client connection got backend {inherited}, which a closed one had")
        held.add(inherited)
    return None


def _refuses_blocks(dsn: str) -> bool:
    """Does the pooler refuse an explicit transaction block (statement pooling)?"""
    try:
        with _connect(dsn) as conn:
            conn.execute("BEGIN")
            conn.execute("ROLLBACK")
    except psycopg.Error as exc:
        return exc.sqlstate == "08P01" or "statement pooling" in str(exc)
    return False
