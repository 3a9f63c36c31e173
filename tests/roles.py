"""A login role of a test's (or a benchmark's) own on the test server, dropped after with what it owns."""
from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo


@contextmanager
def scratch_role(admin_dsn: str, prefix: str, options: str = "", password: str | None = None,
                 settings: dict[str, str] | None = None) -> Iterator[tuple[str, str]]:
    """Role `prefix` + a random tail, `LOGIN` + `options` (e.g. "CREATEDB", "CONNECTION LIMIT 4"), with
    `password` if given and `settings` as its sessions' defaults, allowed to create the run's schema in the
    admin DSN's database. Yields (role, its DSN: the admin's with this user and password, or none). After:
    its sessions ended, the databases it created and what it owns dropped, the role dropped."""
    role = prefix + secrets.token_hex(4)
    ident = sql.Identifier(role)
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        database = sql.Identifier(admin.info.dbname)
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN " + options).format(ident))  # options: the caller's literal
        if password is not None:
            admin.execute(sql.SQL("ALTER ROLE {} PASSWORD {}").format(ident, sql.Literal(password)))
        for name, value in (settings or {}).items():
            admin.execute(sql.SQL("ALTER ROLE {} SET {} = {}").format(ident, sql.Identifier(name), sql.Literal(value)))
        admin.execute(sql.SQL("GRANT CREATE, CONNECT ON DATABASE {} TO {}").format(database, ident))
    params = conninfo_to_dict(admin_dsn)
    params.pop("password", None)
    params.update(user=role, **({"password": password} if password is not None else {}))
    try:
        yield role, make_conninfo(**params)
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (role,))
            for (created,) in admin.execute("SELECT datname FROM pg_database d JOIN pg_roles r ON r.oid = d.datdba "
                                            "WHERE r.rolname = %s", (role,)).fetchall():
                admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(created)))
            admin.execute(sql.SQL("DROP OWNED BY {} CASCADE").format(ident))
            admin.execute(sql.SQL("DROP ROLE {}").format(ident))
