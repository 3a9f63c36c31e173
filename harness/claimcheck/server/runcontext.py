"""Where a run's connections are made and named: one home for the run id, its schema and its DSN.

Every connection of a run is named `claimcheck/<run id>/<role>` in `pg_stat_activity` (roles:
`coordinator`, `w07`, `sampler`, `reaper`, `monitor`, `s-<session>`, `vacuum-worker`, ...), and
works inside the run's schema. The queries that look for a run's backends (the sampler, the
fault injector, cleanup) match :meth:`RunContext.app_pattern`, so naming and matching cannot drift.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import psycopg
from psycopg import sql

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


@dataclass(frozen=True)
class RunContext:
    """One run on one server: what every connection of it needs."""

    dsn: str
    run_id: str

    @property
    def schema(self) -> str:
        return schema_name(self.run_id)

    @property
    def app_prefix(self) -> str:
        """Every connection's application_name starts with this."""
        return f"{APP_PREFIX}{self.run_id}/"

    def app_name(self, role: str) -> str:
        return f"{self.app_prefix}{role}"[:MAX_APP_NAME]

    def role_dsn(self, role: str) -> str:
        """This run's DSN with `role`'s name, for a program that connects from a DSN string (a
        queue library's own code)."""
        return psycopg.conninfo.make_conninfo(self.dsn, application_name=self.app_name(role))

    def app_pattern(self) -> str:
        return app_pattern(self.run_id)

    def _options(self, role: str) -> dict:
        return {"autocommit": True, "application_name": self.app_name(role), "connect_timeout": CONNECT_TIMEOUT_S}

    def connect(self, role: str, *, in_schema: bool = True) -> psycopg.Connection:
        """An autocommit connection named for `role`, in the run's schema unless `in_schema` is False
        (the schema may not exist yet, or may be gone)."""
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
        deadline = time.monotonic() + wait_s
        while True:
            try:
                return self.connect(role, in_schema=in_schema)
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(RECONNECT_PAUSE_S)

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
    conn.execute(_set_search_path(schema))


def _set_search_path(schema: str) -> sql.Composed:
    return sql.SQL("SET search_path TO {}").format(sql.Identifier(schema))
