"""A run's schema is dropped however its run ends, even when Ctrl-C (or SIGTERM) comes as the schema is
made: the signal fuzz (tests/benchmarks/signal_fuzz.py) found one left by an interrupted `interleave`."""
import psycopg
import pytest

from pg_claimcheck.server import schema as schemas
from pg_claimcheck.server import session
from pg_claimcheck.server.session import run_schema


def exists(server, name: str) -> bool:
    with psycopg.connect(server.dsn) as conn:
        return conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (name,)).fetchone() is not None


def test_an_interrupt_once_the_server_made_the_schema_still_drops_it(server, monkeypatch):
    made = []

    def made_then_interrupted(conn, name):  # the server committed it; the interrupt came before we knew
        made.append(name)
        schemas.create_schema(conn, name)
        raise KeyboardInterrupt

    monkeypatch.setattr(session, "create_schema", made_then_interrupted)
    with pytest.raises(KeyboardInterrupt), run_schema(server):
        pass
    assert made and not exists(server, made[0])


def test_another_runs_schema_is_left_alone_by_an_interrupt(server, monkeypatch):
    # The same run id in use by another process: its schema is refused, never dropped (create_schema).
    with run_schema(server) as (_, first):
        monkeypatch.setenv(session.RUN_ID_ENV, first.run_id)

        def interrupted(conn, name):
            raise KeyboardInterrupt

        monkeypatch.setattr(session, "create_schema", interrupted)
        monkeypatch.setattr(session, "this_owner", lambda: {"pid": -1})  # the schema's record names another
        with pytest.raises(KeyboardInterrupt), run_schema(server):
            pass
        assert exists(server, first.schema)
