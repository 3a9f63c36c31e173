"""The harness's own exceptions, all rooted in :class:`ClaimcheckError`.

Every one of them is a problem with the input or the environment: the CLI prints its
message as one paragraph and exits 2. A violation of exactly-once is not an exception;
it is a result.
"""


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
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{path}: cannot read it: {exc}") from None
