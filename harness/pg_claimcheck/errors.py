"""The harness's own exceptions, all rooted in :class:`ClaimcheckError`.

Every one of them is a problem with the input or the environment: the CLI prints its
message as one paragraph and exits 2. A violation of exactly-once is not an exception;
it is a result.
"""
from __future__ import annotations

from typing import BinaryIO


class ClaimcheckError(Exception):
    """Base of every error the harness reports to a user."""


class UsageError(ClaimcheckError):
    """A command-line value is out of range or contradicts another one."""


class SqlFileError(ClaimcheckError):
    """A strategy's SQL file breaks the contract or fails on the server."""


class ServerError(ClaimcheckError):
    """No PostgreSQL server could be found, started or reached."""


class Interrupted(ClaimcheckError):
    """The run was stopped by Ctrl-C or SIGTERM before it finished."""


def read_input(path, error: type[ClaimcheckError]) -> str:
    """A user's input file as text; a missing or unreadable one is `error`, said in one line."""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _unreadable(path, exc, error) from None


def open_input(path, error: type[ClaimcheckError]) -> BinaryIO:
    """A user's input file opened to be read as bytes (a file too large to hold whole, read as it
    streams); a missing or unreadable one is `error`, said as `read_input` says it."""
    try:
        return open(path, "rb")  # the caller closes it (a `with` block)
    except OSError as exc:
        raise _unreadable(path, exc, error) from None


def _unreadable(path, exc: Exception, error: type[ClaimcheckError]) -> ClaimcheckError:
    if isinstance(exc, FileNotFoundError):
        return error(f"{path}: no such file")
    return error(f"{path}: cannot read it: {exc}")
