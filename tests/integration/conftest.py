import pytest

from pg_claimcheck.contract.strategy import load_strategy
from pg_claimcheck.engine.driver import run_strategy
from pg_claimcheck.server.session import run_schema
from pg_claimcheck.settings import RunSettings
from pg_claimcheck.verdict.result import RunResult


@pytest.fixture
def run(server):
    """Run one strategy x setting on the test server, in a schema of its own that is dropped after."""

    def run_one(strategy: str, **settings) -> RunResult:
        with run_schema(server) as (conn, run):
            return run_strategy(conn, server, run, load_strategy(strategy), RunSettings(**settings))

    return run_one
