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
