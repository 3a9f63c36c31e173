"""How the suite finds its server: `--test-dsn`, defaulting to $CLAIMCHECK_DSN, else an embedded
PostgreSQL started once per pytest(-xdist) process. A server that cannot be reached ends the
session with one line. Layers: unit (no server), integration (real server), acceptance (the CLI
in a subprocess).
"""
from __future__ import annotations

import os

import pytest

from pg_claimcheck.errors import ClaimcheckError
from pg_claimcheck.server.provision import DSN_ENV, provide_server

MARKERS = {
    "unit": "pure logic, no server",
    "integration": "runs against a real PostgreSQL server",
    "acceptance": "runs the claimcheck CLI in a subprocess",
    "field": "claim designs of real queue libraries, judged on a real server",
}


@pytest.fixture(autouse=True)
def _secrets_of_this_test_only():
    """The passwords a run has seen are hidden for the rest of its process (pg_claimcheck.server.redaction).
    A CLI run is its own process; in-process tests are not: a fuzzed DSN whose password was
    `claimcheck` or `000` made every later message of that xdist worker read `***: error: ... 60,***`.
    Each test starts from the secrets the process had before it."""
    from pg_claimcheck.server import redaction

    before = set(redaction._known)
    yield
    redaction._known.clear()
    redaction._known.update(before)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--test-dsn", default=os.environ.get(DSN_ENV),
                     help=f"server to test against (default ${DSN_ENV}; else an embedded server)")


def pytest_configure(config: pytest.Config) -> None:
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")


def pytest_report_header(config: pytest.Config) -> str:
    dsn = config.getoption("--test-dsn")
    if not dsn:
        return "claimcheck server: an embedded PostgreSQL per (xdist) worker"
    from pg_claimcheck.server.provision import server_version
    from pg_claimcheck.server.redaction import redact_dsn as redact

    try:
        version, _ = server_version(dsn)
    except ClaimcheckError as exc:
        pytest.exit(f"claimcheck tests need a PostgreSQL server: {exc}", returncode=2)
    return f"claimcheck server: PostgreSQL {version} at {redact(dsn)}"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for layer in MARKERS:
            if f"/{layer}/" in str(item.fspath):
                item.add_marker(layer)


def pytest_terminal_summary(terminalreporter) -> None:
    """Figures tests measure but do not assert (recorded with `record_property`), shown after the run.
    They travel in the test reports, so this works under xdist too."""
    figures = [(report.nodeid, name, value) for report in terminalreporter.stats.get("passed", [])
               if report.when == "call" for name, value in report.user_properties]
    if figures:
        terminalreporter.section("claimcheck figures (reported, not asserted)")
        for nodeid, name, value in figures:
            terminalreporter.write_line(f"{name}: {value}  ({nodeid.split('::')[-1]})")


@pytest.fixture(scope="session")
def server(request: pytest.FixtureRequest):
    try:
        with provide_server(dsn=request.config.getoption("--test-dsn")) as found:
            print(f"\nPostgreSQL {found.version} ({found.source})")
            yield found
    except ClaimcheckError as exc:
        pytest.exit(f"claimcheck tests need a PostgreSQL server: {exc}", returncode=2)
