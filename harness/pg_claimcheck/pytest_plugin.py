"""claimcheck as a pytest plugin: an exactly-once regression guard for your queue, in your CI.

Registered through the `pytest11` entry point, so installing claimcheck is enough::

    def test_claim_is_exactly_once(claimcheck):
        claimcheck.assert_exactly_once("sql/claim.sql", workers=16, jobs=20_000)

The `claimcheck` fixture runs your `.sql` file (the SQL file contract of docs/contracts.md) with real
worker processes against a real server, as `claimcheck check` does (under the default planner
conditions too, docs/plans.md; `plans="none"` for the run as seeded only), and fails the test with
the evidence (job id, workers, attempts, claim times; the planner condition and its plan) when a
job was handed to more than one worker or a claim took more than its limit ("EXACTLY-ONCE
VIOLATED"), and with its cause when none was but the queue made no progress within the run's limits
("NO PROGRESS": a liveness failure, e.g. the server's idle_in_transaction_session_timeout). The server is
`--claimcheck-dsn`, else `$CLAIMCHECK_DSN`, else the `claimcheck_dsn` ini key, else an embedded
PostgreSQL started once per session (once per xdist worker). Every call works in a schema of
its own, so xdist workers sharing one server never see each other's tables.

This module stays thin: names are constants here, everything heavy is imported inside the
fixtures, so a test run that does not use claimcheck pays nothing for it.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

import pytest

if TYPE_CHECKING:
    from pg_claimcheck.server.provision import Server
    from pg_claimcheck.verdict.result import RunResult

DSN_OPTION = "--claimcheck-dsn"
DSN_DEST = "claimcheck_dsn"
DSN_INI = "claimcheck_dsn"
DSN_ENV = "CLAIMCHECK_DSN"  # the same variable as pg_claimcheck.server.provision.DSN_ENV, without importing it
SERVER_FIXTURE = "claimcheck_server"
HELPER_FIXTURE = "claimcheck"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("claimcheck", "claimcheck: exactly-once checks of a PostgreSQL job queue")
    group.addoption(DSN_OPTION, dest=DSN_DEST, default=None, metavar="DSN",
                    help=f"PostgreSQL server for the {HELPER_FIXTURE} fixture (default: ${DSN_ENV}, "
                         f"then the {DSN_INI} ini key, else an embedded server)")
    parser.addini(DSN_INI, f"PostgreSQL server for the {HELPER_FIXTURE} fixture (overridden by "
                           f"{DSN_OPTION} and ${DSN_ENV})", default=None)


def configured_dsn(config: pytest.Config) -> str | None:
    """The flag, then the environment, then the ini file: the nearer to the run, the stronger."""
    return config.getoption(DSN_DEST) or os.environ.get(DSN_ENV) or config.getini(DSN_INI) or None


@pytest.fixture(scope="session", name=SERVER_FIXTURE)
def claimcheck_server(request: pytest.FixtureRequest) -> Iterator["Server"]:
    """The server claimcheck runs against, for the whole session (per xdist worker)."""
    from pg_claimcheck.errors import ClaimcheckError
    from pg_claimcheck.server.provision import provide_server

    # pytest.fail outside the `except`: raised inside it, pytest prints the error, "During handling of the
    # above exception, another exception occurred", then the error again.
    try:
        with provide_server(dsn=configured_dsn(request.config)) as server:
            yield server
        return
    except ClaimcheckError as exc:
        failure = f"claimcheck needs a PostgreSQL server: {exc}"
    pytest.fail(failure, pytrace=False)


class Claimcheck:
    """What the `claimcheck` fixture returns: run a strategy file and judge it."""

    def __init__(self, server: "Server", rootpath: Path) -> None:
        self.server = server
        self.rootpath = rootpath

    def run(self, strategy: str | os.PathLike | None = None, **settings: Any) -> "RunResult":
        """Run a `.sql` file (relative paths from the rootdir, or the cwd) or a built-in name once,
        in a schema of its own, or `lib="procrastinate"` through the library's own workers in a
        database of its own, and return the result (see :func:`pg_claimcheck.run`)."""
        from pg_claimcheck.api import run

        return run(self._locate(strategy), server=self.server, **settings)

    def assert_exactly_once(self, strategy: str | os.PathLike | None = None, **settings: Any) -> "RunResult":
        """Fail the test, with the evidence, unless every job was handled exactly once: the same
        verdict as the CLI's exit code (see :func:`claimcheck.assert_exactly_once` for defaults).

        >>> claimcheck.assert_exactly_once("sql/claim.sql", workers=16, jobs=20_000)  # doctest: +SKIP
        >>> claimcheck.assert_exactly_once(lib="pgqueuer", workers=4, jobs=2_000, faults=True)  # doctest: +SKIP
        """
        from pg_claimcheck.api import ExactlyOnceViolated, NoProgress, assert_exactly_once
        from pg_claimcheck.errors import ClaimcheckError

        __tracebackhide__ = True
        try:
            return assert_exactly_once(self._locate(strategy), server=self.server, **settings)
        except ClaimcheckError as exc:
            failure = f"claimcheck could not run {strategy}: {exc}"
        except ExactlyOnceViolated as exc:
            failure = f"EXACTLY-ONCE VIOLATED: {exc}"
        except NoProgress as exc:
            failure = f"NO PROGRESS (liveness, not a double claim): {exc}"
        pytest.fail(failure, pytrace=False)  # outside the `except`, so the evidence is printed once

    def _locate(self, strategy: str | os.PathLike | None) -> str | None:
        if strategy is None:
            return None
        path = Path(strategy)
        if path.is_absolute() or path.exists() or not (self.rootpath / path).exists():
            return str(path)
        return str(self.rootpath / path)


@pytest.fixture(name=HELPER_FIXTURE)
def claimcheck_fixture(request: pytest.FixtureRequest) -> Claimcheck:
    """`claimcheck.assert_exactly_once("sql/claim.sql", workers=16, jobs=20_000)` in a test."""
    return Claimcheck(request.getfixturevalue(SERVER_FIXTURE), request.config.rootpath)
