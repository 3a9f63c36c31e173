"""The reaper: returns expired leases to the queue, as the seed's sweeper does.

A thread with its own connection runs the strategy's `reap` section (or the seed's statement)
every `reap_every_s`, and records which claim of which job it returned, by the attempt number
the statement returns: the ledger needs that to tell a redelivery from a double claim. A restart
fault takes its connection away: it connects again through the run's one reconnect loop
(pg_claimcheck.server.runcontext.when_up), for as long as the run lasts.
"""
from __future__ import annotations

import math
import threading
import time

import psycopg

from pg_claimcheck.contract.claimrows import attempt_of
from pg_claimcheck.contract.keys import KeySpace, number_of
from pg_claimcheck.contract.queries import QUERIES
from pg_claimcheck.contract.strategy import Strategy
from pg_claimcheck.engine.backend import Stopping
from pg_claimcheck.server.runcontext import RunContext, when_up
from pg_claimcheck.verdict.ledger import Reap


class Reaper:
    def __init__(self, run: RunContext, strategy: Strategy, every_s: float, keys: KeySpace | None = None) -> None:
        self.run = run
        self.statement = strategy.statements.get("reap", QUERIES["reap_expired"])
        self.every_s = every_s
        self.keys = keys
        """The seeded keys, to number what the reap returns as the workers number their claims."""
        self.key_is_int = keys.key_is_int if keys is not None else True
        self.reaps: list[Reap] = []
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._run, name="claimcheck-reaper", daemon=True)

    def _connect(self) -> psycopg.Connection:
        """The reaper's connection, waited for while the server restarts, until the run stops (`Stopping`)."""
        return when_up(lambda: self.run.connect("reaper"), math.inf, give_up=self._stopping)

    def _stopping(self) -> None:
        if self._halt.is_set():
            raise Stopping

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        conn = None
        try:
            while not self._halt.wait(self.every_s):
                try:
                    if conn is None or conn.closed:
                        conn = self._connect()
                    # Timed before the statement is sent, so before it commits: a claim or completion
                    # acknowledged after this moment may be compared with it safely (see the ledger).
                    at = time.monotonic()
                    rows = conn.execute(self.statement).fetchall()
                    # As a claim's rows are read (pg_claimcheck.contract.claimrows): key first, then the attempt.
                    self.reaps.extend(Reap(job=number_of(r[0], self.keys, self.key_is_int),
                                           attempt=attempt_of(r, 1 if len(r) > 1 else None), at=at) for r in rows)
                except psycopg.OperationalError:  # a restart mid-statement: connected again on the next round
                    if conn is not None:
                        conn.close()
                    conn = None
        except Stopping:  # the run ended while the server was away
            pass
        finally:
            if conn is not None:
                conn.close()

    def stop(self) -> list[Reap]:
        self._halt.set()
        if self._thread.is_alive():
            self._thread.join()
        return self.reaps
