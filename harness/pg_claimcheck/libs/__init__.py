"""Real queue libraries under the ledger: `claimcheck lib NAME`.

One adapter per library, one module each (see `pg_claimcheck.libs._adapter` for the interface).
Each Python library is an optional extra: `pip install 'pg-claimcheck[NAME]'`. The adapter module
imports its library at the top, so loading an adapter whose library is missing says how to
install it. An adapter in EXTERNAL drives a worker in another runtime (pg_claimcheck.libs.external),
whose library is installed into a per-user cache when the adapter is loaded.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from pg_claimcheck import install_command
from pg_claimcheck.errors import UsageError

if TYPE_CHECKING:  # an adapter loads psycopg: `claimcheck --help` names the libraries without it
    from pg_claimcheck.libs._adapter import LibraryAdapter

ADAPTERS = {
    "procrastinate": "pg_claimcheck.libs.procrastinate",
    "pgqueuer": "pg_claimcheck.libs.pgqueuer",
    "saq": "pg_claimcheck.libs.saq",
    "huey": "pg_claimcheck.libs.huey",
    "chancy": "pg_claimcheck.libs.chancy",
    "dbos": "pg_claimcheck.libs.dbos",
    "absurd": "pg_claimcheck.libs.absurd",  # its schema by its own CLI, absurdctl
    "graphile-worker": "pg_claimcheck.libs.graphile",  # Node: pg_claimcheck.libs.external
    "pg-boss": "pg_claimcheck.libs.pgboss",
    "pg-boss-12": "pg_claimcheck.libs.pgboss12",  # Node 22, from npm when the machine's node is older
    "bullmq": "pg_claimcheck.libs.bullmq",  # Node: its PostgreSQL backend
    "sidequest": "pg_claimcheck.libs.sidequest",  # Node 22: its PostgreSQL backend
    "delayed_job": "pg_claimcheck.libs.delayed_job",  # Ruby: Debian's packages
}
"""Library name -> its adapter module."""
EXTERNAL = frozenset({"graphile-worker", "pg-boss", "pg-boss-12", "bullmq", "sidequest", "delayed_job"})
"""The adapters whose worker runs in another runtime (pg_claimcheck.libs.external): their library is
installed with that runtime's package manager on first use, not with a Python extra."""


def library_error(exc: BaseException) -> str:
    """A library's exception on one line, with the driver's error beneath it: a library that wraps it
    (procrastinate's "ConnectorException: Database error.") hides what the server said, a serialization
    failure under a SERIALIZABLE default role, say; its cause and SQLSTATE go on the same line."""
    text = " ".join(str(exc).split())
    cause = exc.__cause__ or exc.__context__
    if cause is None:
        return f"{type(exc).__name__}: {text}"
    state = getattr(cause, "sqlstate", None)
    said = str(cause).strip().splitlines()[0] if str(cause).strip() else ""
    return f"{type(exc).__name__}: {text} (from {type(cause).__name__}{f' [{state}]' if state else ''}: {said})"


class LibraryMissing(UsageError):
    """The library an adapter drives is not installed."""


def load_adapter(name: str) -> LibraryAdapter:
    """The adapter for `name`; a clear error when the name is unknown or its library is not installed."""
    if name not in ADAPTERS:
        raise UsageError(f"unknown library {name!r}; claimcheck lib knows {', '.join(ADAPTERS)}")
    try:
        module = importlib.import_module(ADAPTERS[name])
    except ImportError as exc:
        raise LibraryMissing(
            f"claimcheck lib {name} needs the library itself, which is not installed here ({exc}). "
            f"Install it the way its users do, with claimcheck's extra: {install_command(name)}"
        ) from None
    adapter = module.ADAPTER
    adapter.prepare()  # e.g. a worker in another runtime: the runtime and the library, before anything starts
    return adapter
