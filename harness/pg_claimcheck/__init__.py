"""claimcheck: prove whether a PostgreSQL job queue hands each job to exactly one worker.

The public API is small and imported lazily, so that `import pg_claimcheck` (and the pytest plugin
it registers) costs nothing until a run is asked for::

    from pg_claimcheck import run, RunResult, assert_exactly_once

The contracts (the SQL file, the JSON report, the accounting rules) are in `docs/contracts.md`.
"""
TYPE_CHECKING = False  # typing's own constant without importing typing: `import pg_claimcheck` loads nothing

DISTRIBUTION = "pg-claimcheck"
"""The name on PyPI (`pip install pg-claimcheck`): PyPI's `claimcheck` is an unrelated project. The
command and the import package stay `claimcheck`."""


def install_command(extra: str | None = None) -> str:
    """What to type to install claimcheck, or one of its extras; every hint and error says it this way."""
    return f"pip install '{DISTRIBUTION}[{extra}]'" if extra else f"pip install {DISTRIBUTION}"


__all__ = ["run", "assert_exactly_once", "ExactlyOnceViolated", "NoProgress", "RunResult", "__version__"]

if TYPE_CHECKING:
    from pg_claimcheck.api import ExactlyOnceViolated, NoProgress, assert_exactly_once, run
    from pg_claimcheck.verdict.result import RunResult

_LAZY = {"run": "pg_claimcheck.api", "assert_exactly_once": "pg_claimcheck.api",
         "ExactlyOnceViolated": "pg_claimcheck.api", "NoProgress": "pg_claimcheck.api", "RunResult": "pg_claimcheck.verdict.result"}


def _version() -> str:
    """Written once, in pyproject.toml. Read when first asked for: importlib.metadata takes a tenth of a
    second, before the command's first line could answer a Ctrl-C (pg_claimcheck.__main__)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"


def __getattr__(name: str):
    if name == "__version__":
        globals()["__version__"] = found = _version()
        return found
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'pg_claimcheck' has no attribute {name!r}")
