import pytest

from claimcheck.engine.driver import run_strategy
from claimcheck.verdict.result import RunResult
from claimcheck.server.session import run_schema
from claimcheck.settings import RunSettings
from claimcheck.contract.strategy import load_strategy


@pytest.fixture
def run(server):
    """Run one strategy x setting on the test server, in a schema of its own that is dropped after."""

    def run_one(strategy: str, **settings) -> RunResult:
        with run_schema(server) as (conn, run):
            return run_strategy(conn, server, run, load_strategy(strategy), RunSettings(**settings))

    return run_one
