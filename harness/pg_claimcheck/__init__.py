"""claimcheck: prove whether a PostgreSQL job queue hands each job to exactly one worker.

The public API is small and imported lazily, so that `import pg_claimcheck` (and the pytest plugin
it registers) costs nothing until a run is asked for::

    from pg_claimcheck import run, RunResult, assert_exactly_once

The contracts (the SQL file, the JSON report, the accounting rules) are in `docs/contracts.md`.
"""
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

DISTRIBUTION = "pg-claimcheck"
"""The name on PyPI (`pip install pg-claimcheck`): PyPI's `claimcheck` is an unrelated project. The
command and the import package stay `claimcheck`."""


def install_command(extra: str | None = None) -> str:
    """What to type to install claimcheck, or one of its extras; every hint and error says it this way."""
    return f"pip install '{DISTRIBUTION}[{extra}]'" if extra else f"pip install {DISTRIBUTION}"


try:
    __version__ = version(DISTRIBUTION)  # written once, in pyproject.toml
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = ["run", "assert_exactly_once", "ExactlyOnceViolated", "NoProgress", "RunResult", "__version__"]

if TYPE_CHECKING:
    from pg_claimcheck.api import ExactlyOnceViolated, NoProgress, assert_exactly_once, run
    from pg_claimcheck.verdict.result import RunResult

_LAZY = {"run": "pg_claimcheck.api", "assert_exactly_once": "pg_claimcheck.api",
         "ExactlyOnceViolated": "pg_claimcheck.api", "NoProgress": "pg_claimcheck.api", "RunResult": "pg_claimcheck.verdict.result"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'pg_claimcheck' has no attribute {name!r}")
