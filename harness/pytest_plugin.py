"""claimcheck as a pytest plugin: an exactly-once regression guard for your queue, in your CI.

Registered through the `pytest11` entry point, so installing claimcheck is enough::

    def test_claim_is_exactly_once(claimcheck):
        claimcheck.assert_exactly_once("sql/claim.sql", workers=16, jobs=20_000)

The `claimcheck` fixture runs your `.sql` file (the strategy contract of DESIGN.md) with real
worker processes against a real server and fails the test with the evidence (job id, workers,
attempts, claim times) when a job was handed to more than one worker. The server is
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
    from harness.result import RunResult
    from harness.provision import Server

DSN_OPTION = "--claimcheck-dsn"
DSN_DEST = "claimcheck_dsn"
DSN_INI = "claimcheck_dsn"
DSN_ENV = "CLAIMCHECK_DSN"  # the same variable as harness.provision.DSN_ENV, without importing it
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
    from harness.errors import ClaimcheckError
    from harness.provision import provide_server

    try:
        with provide_server(dsn=configured_dsn(request.config)) as server:
            yield server
    except ClaimcheckError as exc:
        pytest.fail(f"claimcheck needs a PostgreSQL server: {exc}", pytrace=False)


class Claimcheck:
    """What the `claimcheck` fixture returns: run a strategy file and judge it."""

    def __init__(self, server: "Server", rootpath: Path) -> None:
        self.server = server
        self.rootpath = rootpath

    def run(self, strategy: str | os.PathLike, **settings: Any) -> "RunResult":
        """Run a `.sql` file (relative paths from the rootdir, or the cwd) or a built-in name once,
        in a schema of its own, and return the result. `settings` are RunSettings fields;
        `work_ms` takes the CLI's forms (5, 1-10, exp:5)."""
        from harness.driver import run_strategy
        from harness.schema import new_run_id
        from harness.session import run_schema
        from harness.settings import RunSettings, WorkTime
        from harness.strategy import load_strategy

        if "work_ms" in settings:
            settings["work"] = WorkTime.parse(str(settings.pop("work_ms")))
        loaded = load_strategy(self._locate(strategy))
        run_settings = RunSettings(**settings)
        with run_schema(self.server, run_id=new_run_id()) as (conn, schema, run_id):
            return run_strategy(conn, self.server, schema, run_id, loaded, run_settings)

    def assert_exactly_once(self, strategy: str | os.PathLike, *, workers: int = 16, jobs: int = 20_000,
                            batch: int = 10, mode: str = "lease", **settings: Any) -> "RunResult":
        """Fail the test, with the evidence, unless every job was claimed exactly once.

        >>> claimcheck.assert_exactly_once("sql/claim.sql", workers=16, jobs=20_000)  # doctest: +SKIP
        """
        from harness.errors import ClaimcheckError

        __tracebackhide__ = True
        try:
            result = self.run(strategy, workers=workers, jobs=jobs, batch=batch, mode=mode, **settings)
        except ClaimcheckError as exc:
            pytest.fail(f"claimcheck could not run {strategy}: {exc}", pytrace=False)
        if not result.verdict.exactly_once:
            pytest.fail(failure_message(result), pytrace=False)
        return result

    def _locate(self, strategy: str | os.PathLike) -> str:
        path = Path(strategy)
        if path.is_absolute() or path.exists() or not (self.rootpath / path).exists():
            return str(path)
        return str(self.rootpath / path)


def failure_message(result: "RunResult") -> str:
    """The verdict in one line, then the counterexample: each claim of the first violated jobs."""
    from harness.report import evidence_lines

    v, s = result.verdict, result.settings
    head = (f"{result.strategy.source or result.strategy.name} is not exactly-once: "
            f"{v.double_claimed_jobs:,} job(s) handed to more than one worker, {v.extra_claims:,} extra claims, "
            f"{v.unclaimed_jobs:,} unclaimed, {v.unexpected_jobs:,} unexpected ids "
            f"({s.workers} workers, {s.jobs:,} jobs, batch {s.batch}, {s.mode} mode). "
            "Evidence (times from the start of the run):")
    return "\n".join([head, *evidence_lines(v.violations)])


@pytest.fixture(name=HELPER_FIXTURE)
def claimcheck_fixture(request: pytest.FixtureRequest) -> Claimcheck:
    """`claimcheck.assert_exactly_once("sql/claim.sql", workers=16, jobs=20_000)` in a test."""
    return Claimcheck(request.getfixturevalue(SERVER_FIXTURE), request.config.rootpath)
