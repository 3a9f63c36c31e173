"""A claim strategy is data: a name, its named statements, an isolation level.

Built-ins (scenarios/*.sql) and users' files load through the same function, so the path users
rely on is the one the project exercises every day. A strategy is checked twice before any
worker starts: here against the contract, and by :func:`validate_on_server` against the server.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql as pgsql

from claimcheck.errors import SqlFileError, UsageError
from claimcheck.sqlfile import SqlFile, check_params, placeholders, read_sql_file
from claimcheck.scenarios import SHARED_LIFECYCLE, builtin_names, scenario_path

ISOLATION_LEVELS = ("read committed", "repeatable read", "serializable")
HEADER_KEYS = frozenset({"isolation", "expected", "seed", "summary", "lifecycle"})
CLAIM_PARAMS = {"worker", "batch", "lease_seconds"}
# Which parameters each section may use; `ids` is the pick's result, given to the claim.
SECTION_PARAMS: dict[str, set[str]] = {
    "pick": CLAIM_PARAMS,
    "claim": CLAIM_PARAMS | {"ids"},
    "complete": {"id", "attempts", "worker"},
    "fail": {"id", "attempts", "worker", "error", "backoff_unit_s", "backoff_cap_s"},
    "extend": {"id", "attempts", "worker", "lease_seconds"},
    "reap": set(),
}
VALIDATION_TIMEOUT_MS = 10_000


@dataclass(frozen=True)
class Strategy:
    """One way to claim jobs."""

    name: str
    """The built-in's name, or the file's stem."""
    statements: dict[str, str]
    """Section name -> SQL with `%(param)s` placeholders."""
    isolation: str = "read committed"
    """Isolation level of every transaction the workers run."""
    expected: str | None = None
    """`safe` / `unsafe` for built-ins; None for users' files. Never used to judge a run."""
    seed: str | None = None
    """Where in the seed write-ups this strategy comes from."""
    summary: str | None = None
    source: str = ""
    """The file it was read from."""

    @property
    def has_pick(self) -> bool:
        return "pick" in self.statements

    @property
    def has_complete(self) -> bool:
        return "complete" in self.statements

    def has(self, section: str) -> bool:
        return section in self.statements


def load_strategy(name_or_path: str) -> Strategy:
    """A built-in by name (`skip-locked`) or a user's file by path (`my_claim.sql`)."""
    path = Path(name_or_path)
    if not name_or_path.endswith(".sql") and not path.exists():
        builtin = scenario_path(name_or_path)
        if not builtin.exists():
            raise UsageError(f"no strategy named {name_or_path!r} and no such file; built-ins are: "
                             f"{', '.join(builtin_names())}")
        path = builtin
    return strategy_from_file(read_sql_file(path, HEADER_KEYS), name=_name_of(path))


def _name_of(path: Path) -> str:
    return path.stem.replace("_", "-") if path.parent == scenario_path("x").parent else path.stem


def strategy_from_file(parsed: SqlFile, name: str) -> Strategy:
    path = parsed.path
    unknown = [s for s in parsed.sections if s not in SECTION_PARAMS]
    if unknown:
        section = parsed.sections[unknown[0]]
        raise SqlFileError(f"{path}:{section.line}: unknown section '{section.name}'; a strategy file may have "
                           f"{', '.join(SECTION_PARAMS)} (claim is required)")
    if "claim" not in parsed.sections:
        raise SqlFileError(f"{path}: no '-- name: claim' section; the claim statement is required "
                           "and must return the claimed job id first (its attempt number second, optionally)")
    for section in parsed.sections.values():
        allowed = SECTION_PARAMS[section.name] - ({"ids"} if "pick" not in parsed.sections else set())
        check_params(section, allowed, path)
    isolation = " ".join(parsed.headers.get("isolation", "read committed").lower().split())
    if isolation not in ISOLATION_LEVELS:
        raise SqlFileError(f"{path}: isolation {parsed.headers['isolation']!r} is not one of "
                           f"{', '.join(ISOLATION_LEVELS)}")
    expected = parsed.headers.get("expected")
    statements = {n: s.sql for n, s in parsed.sections.items()}
    lifecycle = parsed.headers.get("lifecycle")
    if lifecycle is not None:
        if lifecycle.strip().lower() != "shared":
            raise SqlFileError(f"{path}: lifecycle {lifecycle!r}: the only value is 'shared' (the fenced "
                               "complete / fail / extend of scenarios/_lifecycle.sql)")
        shared = read_sql_file(SHARED_LIFECYCLE).sections
        statements = {**{n: s.sql for n, s in shared.items()}, **statements}
    return Strategy(
        name=name,
        statements=statements,
        isolation=isolation,
        expected=expected.lower() if expected else None,
        seed=parsed.headers.get("seed"),
        summary=parsed.headers.get("summary"),
        source=str(path),
    )


def sample_params(strategy: Strategy, section: str, **values: object) -> dict[str, object]:
    """The parameters a section uses, from the values on offer."""
    return {k: values[k] for k in placeholders(strategy.statements[section])}


def validate_on_server(conn: psycopg.Connection, strategy: Strategy) -> None:
    """Run every statement once on the seeded table inside a transaction that is rolled back.

    This catches what only the server can say (syntax, unknown columns, type errors, several
    statements in one section) and checks the claim's result shape, before any worker starts.
    """
    values: dict[str, object] = {"worker": "claimcheck-validate", "batch": 1, "lease_seconds": 30.0,
                                 "ids": [], "id": 0, "attempts": 0, "error": "validation",
                                 "backoff_unit_s": 10.0, "backoff_cap_s": 3600.0}
    try:
        with conn.transaction(force_rollback=True):
            conn.execute(pgsql.SQL("SET LOCAL statement_timeout = {}").format(VALIDATION_TIMEOUT_MS))
            conn.execute(pgsql.SQL("SET TRANSACTION ISOLATION LEVEL {}").format(pgsql.SQL(strategy.isolation.upper())))
            for section in SECTION_PARAMS:
                if section not in strategy.statements:
                    continue
                cur = _run_section(conn, strategy, section, values)
                if section == "pick":
                    values["ids"] = [r[0] for r in cur.fetchall()] if cur.description else []
                elif section == "claim":
                    _check_claim_result(strategy, cur)
    except psycopg.Error as exc:
        raise SqlFileError(_server_message(strategy, section, exc)) from None


def _run_section(conn: psycopg.Connection, strategy: Strategy, section: str, values: dict) -> psycopg.Cursor:
    # prepare=True: the extended protocol, as the workers use it. It rejects several statements in
    # one section, which the simple protocol (used for a query without parameters) would run.
    return conn.execute(strategy.statements[section], sample_params(strategy, section, **values), prepare=True)


def _check_claim_result(strategy: Strategy, cur: psycopg.Cursor) -> None:
    if not cur.description:
        raise SqlFileError(f"{strategy.source}: section 'claim' returns no rows; it must end with "
                           "RETURNING id, attempts (the claimed job id first)")
    rows = cur.fetchall()
    if rows and not isinstance(rows[0][0], int):
        raise SqlFileError(f"{strategy.source}: section 'claim' returns {type(rows[0][0]).__name__} "
                           f"in its first column ({cur.description[0].name}); it must be the job id")
    if len(cur.description) > 1 and rows and rows[0][1] is not None and not isinstance(rows[0][1], int):
        raise SqlFileError(f"{strategy.source}: section 'claim' returns {type(rows[0][1]).__name__} in its "
                           f"second column ({cur.description[1].name}); it must be the attempt number")


def _server_message(strategy: Strategy, section: str, exc: psycopg.Error) -> str:
    diag = exc.diag
    detail = (diag.message_primary or str(exc)).strip()
    where = f" (at character {diag.statement_position})" if diag.statement_position else ""
    hint = f" Hint: {diag.message_hint}." if diag.message_hint else ""
    return (f"{strategy.source}: section '{section}' fails on the server: {detail}{where}.{hint} "
            "Nothing was run; fix the statement and try again.")


