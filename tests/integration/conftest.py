import pytest

from pg_claimcheck import api
from pg_claimcheck.verdict.result import RunResult


@pytest.fixture
def run(server):
    """Run one strategy x setting on the test server as `api.run` does (its refusals first), in a schema
    of its own that is dropped after."""

    def run_one(strategy: str, **settings) -> RunResult:
        return api.run(strategy, server=server, **settings)

    return run_one
