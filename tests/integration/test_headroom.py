"""Connection headroom as a role without pg_read_all_stats sees it, and a worker that cannot connect
reported by its own error (issue 25)."""
from __future__ import annotations

import dataclasses

import psycopg
import pytest

from pg_claimcheck.contract.queries import QUERIES
from pg_claimcheck.contract.strategy import load_strategy
from pg_claimcheck.engine import driver
from pg_claimcheck.errors import ServerError
from pg_claimcheck.server.session import run_schema
from pg_claimcheck.settings import RunSettings
from roles import scratch_role

HELD = 5


@pytest.fixture
def role(server):
    """A login role that is not a superuser, allowed to create the run's schema; dropped after."""
    with scratch_role(server.dsn, "cc_headroom_", "NOSUPERUSER CONNECTION LIMIT 4") as (name, dsn):
        yield name, dataclasses.replace(server, dsn=dsn)


def test_headroom_counts_other_roles_sessions_it_cannot_see_the_type_of(server, role):
    # backend_type is NULL for another role's session: the old count saw none of them.
    _, as_role = role
    held = [psycopg.connect(server.dsn, autocommit=True) for _ in range(HELD)]
    try:
        with psycopg.connect(as_role.dsn, autocommit=True) as conn:
            room = conn.execute("SELECT current_setting('max_connections')::int"
                                " - current_setting('superuser_reserved_connections')::int").fetchone()[0]
            headroom = conn.execute(QUERIES["connection_headroom"]).fetchone()[0]
        # At least our HELD connections and this one are in use, whatever else runs on the server;
        # and the role's own limit (4, one in use) bounds it too.
        assert headroom <= room - HELD - 1
        assert headroom <= 3
    finally:
        for conn in held:
            conn.close()


def test_a_worker_that_cannot_connect_is_reported_by_its_own_error_not_the_barriers(role, monkeypatch):
    # The role may open 4 connections: the coordinator's, then the sampler's and two workers'; the
    # third worker is refused. With the headroom check passing (as it did, wrongly), the run used
    # to end in a BrokenBarrierError traceback of another worker.
    _, as_role = role
    with run_schema(as_role) as (conn, run):
        with pytest.raises(ServerError, match="the server has room for"):
            driver.run_strategy(conn, as_role, run, load_strategy("skip-locked"),
                                RunSettings(workers=3, jobs=20))
        monkeypatch.setattr(driver, "check_headroom", lambda conn, needed, **words: None)
        with pytest.raises(ServerError) as failed:
            driver.run_strategy(conn, as_role, run, load_strategy("skip-locked"),
                                RunSettings(workers=3, jobs=20))
    message = str(failed.value)
    assert message.startswith("workers could not start: worker ")
    assert "too many connections for role" in message, message
    assert "BrokenBarrierError" not in message and "Traceback" not in message
