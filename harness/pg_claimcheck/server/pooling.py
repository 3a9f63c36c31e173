"""Is there a connection pooler between us and the server, and how does it pool? Found by behaviour.

A pooler is not told apart by its port or its name but by what it does to backends:

- **transaction pooling**: two client connections run their transactions on the same backend (the
  same `pg_backend_pid()`), or one client connection's backend changes between its transactions;
- **statement pooling**: as transaction pooling, and an explicit transaction block is refused
  (PgBouncer: SQLSTATE 08P01, "transaction blocks not allowed in statement pooling mode");
- **session pooling**: each client connection keeps one backend, but a new client connection gets
  the backend a closed one had (a direct server starts a new backend, a new pid, for each).

The result is shown in the report header (`postgres.pooler`) and decides how the run connects
(see pg_claimcheck.server.runcontext: through a pooler every transaction carries its own search path).
For a PgBouncer we started, the mode and pool size are known and not probed. Behind statement
pooling the workers can run only a design whose every transaction is one statement; the others are
refused before anything is made (:func:`refuse_transaction_blocks`).
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import psycopg

from pg_claimcheck.errors import ServerError, UsageError
from pg_claimcheck.server.redaction import redact_dsn, scrub

if TYPE_CHECKING:
    from pg_claimcheck.contract.strategy import Strategy

CONNECT_TIMEOUT_S = 5
TRIES = 3
RELEASE_WAIT_S = 0.05
_PID = "SELECT pg_backend_pid()"


@dataclass(frozen=True)
class Pooler:
    """The pooler in front of the workers' connections."""

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

    @property
    def pools_statements(self) -> bool:
        """Statement pooling: no transaction block can be opened through it."""
        return self.mode == "statement"


REFUSES_BLOCKS = "statement pooling refuses every transaction block (PgBouncer answers BEGIN with SQLSTATE 08P01)"


def refuse_behind_statement_pool(pooler: Pooler | None, what: str, needs: str, fix: str, *,
                                 only_found: bool = True) -> None:
    """A verb, or its setup, that holds a transaction across statements on connections a statement pool
    carries: refused (exit 2) in one paragraph, `what` cannot run because it `needs`, and the `fix`.
    `only_found`: only a pool found in front of --dsn, which carries every connection; behind
    --pooler pgbouncer:statement only the workers are pooled and the rest connect directly."""
    if pooler is None or not pooler.pools_statements or (only_found and pooler.started):
        return
    raise UsageError(f"{what}: {needs}, and {REFUSES_BLOCKS}. Nothing was run: {fix}")


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


def refuse_statement_mode(dsn: str, pooler: Pooler) -> None:
    """`--pooler` in front of a pooler in statement mode: our PgBouncer's transactions (a worker's claim and
    its prelude, lock mode's BEGIN) would reach a pool that refuses them, so say so before anything is made."""
    if pooler.mode == "statement":
        raise UsageError(f"{redact_dsn(dsn)} goes through a pooler in statement mode ({pooler.evidence}, and it "
                         "refuses transaction blocks); --pooler would put a PgBouncer of claimcheck's in front of "
                         "it for the workers. Leave --pooler out to run through that pool as it is, or point --dsn "
                         "at the server and give --pooler pgbouncer:statement")


PER_JOB_SECTIONS = ("complete", "fail", "extend")
"""A worker's per-job sections in lease mode: one of several statements is a transaction block of its own."""


def transaction_blocks(strategy: Strategy, mode: str) -> list[str]:
    """Why a worker of `strategy` in `mode` needs an explicit transaction block (statement pooling
    refuses every one), in words; empty when each of its statements is a transaction of its own."""
    needs = ["lock mode holds one transaction across the claim, the work and the completions"] \
        if mode == "lock" else []
    if strategy.has_pick:
        needs.append("its pick and its claim run in one transaction")
    elif len(strategy.steps("claim")) > 1:
        needs.append(f"its claim is {len(strategy.steps('claim'))} statements in one transaction")
    needs += [f"its {section} is {len(strategy.steps(section))} statements in one transaction"
              for section in PER_JOB_SECTIONS if strategy.has(section) and len(strategy.steps(section)) > 1]
    return needs


def refuse_transaction_blocks(pooler: Pooler | None, strategies: Sequence[Strategy], modes: Sequence[str]) -> None:
    """Workers behind statement pooling can run only a design whose every transaction is one statement.

    Refused (exit 2) rather than run: PgBouncer answers a BEGIN in statement mode with SQLSTATE 08P01
    and closes the client's connection, so every claim would fail before it claimed anything and the
    run would count errors instead of showing what the design does with its jobs. One paragraph names
    every strategy x mode of the run that needs a transaction block, and why."""
    if pooler is None or pooler.mode != "statement":
        return
    refused = [(strategy.name, mode, needs) for strategy in strategies for mode in dict.fromkeys(modes)
               if (needs := transaction_blocks(strategy, mode))]
    if not refused:
        return
    if len(refused) == 1:
        (name, mode, needs), = refused
        what = f"{name} in {mode} mode cannot run"
        fix = ("run it in lease mode (--mode lease), where a lone claim statement commits on its own"
               if mode == "lock" and len(needs) == 1 else
               "a design for statement pooling claims in one statement and finishes each job in one")
        why = "; ".join(needs)
    else:  # grouped by reason: a sweep's lock mode is one reason for every strategy
        what = f"{len(refused)} of the runs cannot run"
        fix = "leave them out (--strategies, --mode lease)"
        by_need: dict[str, dict[str, None]] = {}
        for name, _mode, needs in refused:
            for need in needs:
                by_need.setdefault(need, {})[name] = None
        why = "; ".join(f"{need.replace('its ', 'the ', 1)} ({', '.join(names)})" for need, names in by_need.items())
    raise UsageError(f"{what} behind {pooler_words(pooler.as_dict(), False)}: {why}, and statement pooling "
                     "refuses every transaction block (PgBouncer answers BEGIN with SQLSTATE 08P01 and closes the "
                     f"connection), so no claim could run. Nothing was run: {fix}, or put the workers behind a "
                     "transaction or session pool (--pooler pgbouncer:transaction)")
