"""Databases of library runs (`claimcheck_<run id>`, see pg_claimcheck.libs.database): dropped by their
run, and swept by the next run of any verb once their owner is proven dead (a SIGKILLed `lib` run
cannot drop its own), as a run's schema is (pg_claimcheck.server.schema.sweep_leftovers)."""
from __future__ import annotations

import psycopg
from psycopg import sql
from rich.console import Console

from pg_claimcheck.server.ownership import abandoned, left_by
from pg_claimcheck.server.provision import Server
from pg_claimcheck.server.runcontext import SCHEMA_PREFIX, RunContext

DROP_LOCK_TIMEOUT = "10s"


def sweep_databases(conn: psycopg.Connection, server: Server, ours: str) -> list[str]:
    """Drop the databases of library runs whose owner is proven dead, as schemas are swept."""
    swept = []
    for name, owner in abandoned(conn, "leftover_databases", ours):
        if drop_database(RunContext(server.dsn, name[len(SCHEMA_PREFIX):], server.topology), server.version_num):
            swept.append(f"swept database {name} {left_by(owner)}")
    return swept


def drop_database(run: RunContext, version_num: int) -> bool:
    """Drop the run's database, closing what is still connected to it (workers we killed may
    leave backends behind for a moment). A failure only warns, with the command to finish by hand."""
    name = run.schema
    if not name.startswith(SCHEMA_PREFIX):  # a guard, not a feature: never drop anything else
        raise ValueError(f"refusing to drop database {name!r}")
    try:
        with run.connect("cleanup", in_schema=False) as conn:
            conn.execute(f"SET lock_timeout = '{DROP_LOCK_TIMEOUT}'")
            if version_num >= 130000:
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
            else:
                conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        return True
    except psycopg.Error as exc:
        Console(stderr=True).print(f"claimcheck: warning: could not drop database {name}: {str(exc).strip()}; "
                                   f"drop it by hand with DROP DATABASE {name} WITH (FORCE)", markup=False)
        return False
