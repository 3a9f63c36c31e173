"""A claim strategy is data: a name, its named statements, an isolation level.

Built-ins (scenarios/*.sql) and users' files load through the same function, so the path users
rely on is the one the project exercises every day. A strategy is checked twice before any
worker starts: here against the contract, and by :func:`validate_on_server` against the server.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import psycopg
from psycopg import errors
from psycopg import sql as pgsql

from pg_claimcheck.contract.dialect import placeholders, split_statements, to_positional
from pg_claimcheck.contract.sqlfile import SqlFile, check_params, read_sql_file
from pg_claimcheck.errors import SqlFileError, UsageError
from pg_claimcheck.scenarios import SHARED_LIFECYCLE, builtin_names, scenario_path

ISOLATION_LEVELS = ("read committed", "repeatable read", "serializable")
HEADER_KEYS = frozenset({"isolation", "expected", "seed", "summary", "lifecycle", "source"})
CLAIM_PARAMS = {"worker", "batch", "lease_seconds"}
# Which parameters each section may use; `ids` is the pick's first column, given to the claim
# (with every other column of the pick, as an array named after the column).
SECTION_PARAMS: dict[str, set[str]] = {
    "schema": {"jobs", "key_base"},
    "seed": {"jobs", "key_base"},
    "remaining": set(),
    "pick": CLAIM_PARAMS,
    "claim": CLAIM_PARAMS | {"ids"},
    "complete": {"id", "attempts", "worker"},
    "fail": {"id", "attempts", "worker", "error", "backoff_unit_s", "backoff_cap_s"},
    "extend": {"id", "attempts", "worker", "lease_seconds"},
    "after_commit": {"id", "attempts", "worker"},
    "reap": set(),
    "enqueue": {"key"},
}
PER_JOB_SECTIONS = ("complete", "fail", "extend", "after_commit")
"""Sections run per claimed job: besides their own parameters they may use any other column the claim
returns, by its name (a fencing token, a claim id, a fetched-at time): `carried` columns."""
OWN_SCHEMA_SECTIONS = ("schema", "seed", "remaining")
"""A file that brings its own tables has all three; without them it runs on our `jobs` table."""
RUN_SECTIONS = ("pick", "claim", "complete", "fail", "extend", "after_commit", "reap", "remaining")
"""The sections validation runs, in this order (schema and seed have run for real by then)."""
VALIDATION_TIMEOUT_MS = 10_000
INT_TYPES = {20, 21, 23}  # int8, int2, int4 type oids


@dataclass(frozen=True)
class ClaimShape:
    """What the claim returns, learnt from running it once on the server."""

    columns: tuple[str, ...]
    key_is_int: bool
    """The key (first column) is an integer type; else keys are compared by their text form."""
    attempt_index: int | None
    """The column named `attempts` (or `attempt`), else the second column if it is an integer."""
    attempt_is_int: bool = False
    """The attempt column is an integer type: its text, as the server sends it, is the number's own."""
    lease_index: int | None = None
    """The column named `lease_until`: the lease's end, a server timestamp."""
    max_attempts_index: int | None = None
    """The column named `max_attempts`: a claim above it is a violation."""
    pick_columns: tuple[str, ...] = ()
    """The pick's columns; the claim receives each as an array parameter of that name."""
    carried: tuple[tuple[str, int], ...] = ()
    """(name, column) of each claim column a per-job section uses as `%(name)s`: the job carries the
    value its claim returned to its complete, fail, extend and after_commit."""


def shape_of(description: Sequence[Any], pick_columns: tuple[str, ...] = ()) -> ClaimShape:
    names = tuple(c.name for c in description)
    lower = [n.lower() for n in names]

    def named(*options: str) -> int | None:
        return next((lower.index(o) for o in options if o in lower), None)

    attempt = named("attempts", "attempt")
    if attempt is None and len(names) > 1 and description[1].type_code in INT_TYPES \
            and lower[1] not in ("lease_until", "max_attempts"):
        attempt = 1
    return ClaimShape(columns=names, key_is_int=description[0].type_code in INT_TYPES, attempt_index=attempt,
                      attempt_is_int=attempt is not None and description[attempt].type_code in INT_TYPES,
                      lease_index=named("lease_until"), max_attempts_index=named("max_attempts"),
                      pick_columns=pick_columns)


DEFAULT_SHAPE = ClaimShape(columns=("id", "attempts"), key_is_int=True, attempt_index=1, attempt_is_int=True)


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
    lines: dict[str, tuple[str, int]] = field(default_factory=dict)
    """Section name -> (the file it came from, the line its SQL starts on), for the server's errors."""
    session: tuple[tuple[str, str], ...] = ()
    """Settings every worker's session runs under (a condition's: pg_claimcheck.plans.conditions), set when
    the worker connects, or through a pooler at the start of each of its transactions: never in the
    statements' text, which stay the file's, with its line numbers and the fast path."""

    @property
    def has_pick(self) -> bool:
        return "pick" in self.statements

    @property
    def picking_section(self) -> str:
        """The section holding the limiting subquery, first of the claim's transaction: the pick, else the claim."""
        return "pick" if self.has_pick else "claim"

    @property
    def has_complete(self) -> bool:
        return "complete" in self.statements

    def has(self, section: str) -> bool:
        return section in self.statements

    @property
    def own_schema(self) -> bool:
        """Does the file bring its own tables (`schema`, `seed`, `remaining`)?"""
        return "schema" in self.statements

    def steps(self, section: str) -> tuple[str, ...]:
        """The statements of a section, in order; the section's rows are those of the last."""
        return self._steps[section]

    @cached_property
    def _steps(self) -> dict[str, tuple[str, ...]]:
        return {name: tuple(text for text, _ in split_statements(body)) for name, body in self.statements.items()}

    def where(self, section: str, step: int = 0, position: int | None = None, sent: str | None = None) -> str:
        """`file:line` of a section's statement (and of a character in it, as the server numbers the
        statement it was sent: `sent`, else the statement with `$n` for each placeholder, which spans
        no line)."""
        path, first = self.lines.get(section, (self.source, 0))
        if not first:
            return path
        text, offset = split_statements(self.statements[section])[step]
        within = (to_positional(text)[0] if sent is None else sent)[:position - 1].count("\n") if position else 0
        return f"{path}:{first + offset + within}"

    @cached_property
    def bound_steps(self) -> dict[str, tuple[tuple[str, tuple[str, ...]], ...]]:
        """Each section's statements with the parameter names each uses, parsed once (a worker runs
        them per claim and per job)."""
        return {name: tuple((text, tuple(placeholders(text))) for text in steps) for name, steps in self._steps.items()}


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
    own = [s for s in OWN_SCHEMA_SECTIONS if s in parsed.sections]
    if own and len(own) < len(OWN_SCHEMA_SECTIONS):
        missing = [s for s in OWN_SCHEMA_SECTIONS if s not in parsed.sections]
        raise SqlFileError(f"{path}: a file with its own tables needs the sections schema (its tables), seed "
                           f"(creates %(jobs)s jobs and returns their keys) and remaining (counts unfinished "
                           f"jobs); {', '.join(missing)} missing")
    for section in parsed.sections.values():
        beyond = ""
        allowed = SECTION_PARAMS[section.name] - ({"ids"} if "pick" not in parsed.sections else set())
        if section.name == "claim" and "pick" in parsed.sections:
            # The pick's column names are known only once the server has run it (validate_on_server).
            allowed = allowed | section.params
        if section.name in PER_JOB_SECTIONS:
            # The claim's columns are known only once the server has run it (validate_on_server); here a
            # name the claim's text never mentions is a typo.
            allowed = allowed | (section.params & words(parsed.sections["claim"].sql))
            beyond = ", and any column the claim returns, by its name (for example %(claim_token)s)"
        check_params(section, allowed, path, beyond)
    isolation = " ".join(parsed.headers.get("isolation", "read committed").lower().split())
    if isolation not in ISOLATION_LEVELS:
        raise SqlFileError(f"{path}: isolation {parsed.headers['isolation']!r} is not one of "
                           f"{', '.join(ISOLATION_LEVELS)}")
    expected = parsed.headers.get("expected")
    statements = {n: s.sql for n, s in parsed.sections.items()}
    lines = {n: (str(path), s.sql_line) for n, s in parsed.sections.items()}
    lifecycle = parsed.headers.get("lifecycle")
    if lifecycle is not None:
        if lifecycle.strip().lower() != "shared":
            raise SqlFileError(f"{path}: lifecycle {lifecycle!r}: the only value is 'shared' (the fenced "
                               "complete / fail / extend of scenarios/_lifecycle.sql)")
        shared = read_sql_file(SHARED_LIFECYCLE).sections
        statements = {**{n: s.sql for n, s in shared.items()}, **statements}
        lines = {**{n: (str(SHARED_LIFECYCLE), s.sql_line) for n, s in shared.items()}, **lines}
    return Strategy(
        name=name,
        statements=statements,
        isolation=isolation,
        expected=expected.lower() if expected else None,
        seed=parsed.headers.get("seed"),
        summary=parsed.headers.get("summary"),
        source=str(path),
        lines=lines,
    )


def words(sql: str) -> set[str]:
    """The identifiers a statement's text mentions (lower-cased, as the server folds unquoted names)."""
    return {w.lower() for w in re.findall(r"[A-Za-z_][A-Za-z0-9_$]*", sql)} | set(re.findall(r'"([^"]+)"', sql))


def carried_columns(strategy: Strategy, columns: tuple[str, ...]) -> tuple[tuple[str, int], ...]:
    """(name, column) of each claim column the per-job sections use beyond their own parameters;
    a name the claim does not return is refused with its section's file and line."""
    carried: dict[str, int] = {}
    for section in PER_JOB_SECTIONS:
        if section not in strategy.statements:
            continue
        for name in sorted(placeholders(strategy.statements[section]) - SECTION_PARAMS[section]):
            if name not in columns:
                raise SqlFileError(f"{strategy.where(section)}: section '{section}' uses %({name})s, which is "
                                   f"neither a parameter of '{section}' nor a column the claim returns "
                                   f"({', '.join(columns)})")
            carried[name] = columns.index(name)
    return tuple(carried.items())


def sample_params(strategy: Strategy, section: str, **values: object) -> dict[str, object]:
    """The parameters a section uses, from the values on offer."""
    return {k: values[k] for k in placeholders(strategy.statements[section])}


def execute_section(conn: psycopg.Connection, strategy: Strategy, section: str, values: dict[str, Any],
                    prepare: bool | None = None) -> psycopg.Cursor:
    """Run a section's statements in order, each with the parameters it uses; the last one's cursor."""
    cur = None
    for statement, names in strategy.bound_steps[section]:
        cur = conn.execute(statement, {k: values[k] for k in names}, prepare=prepare)
    assert cur is not None, f"section {section} has no statement"  # the contract: every section has one
    return cur


def pick_params(pick_columns: tuple[str, ...], rows: list[Any]) -> dict[str, list[Any]]:
    """The pick's rows as the claim's parameters: one array per column, and `ids` (the first)."""
    columns = list(zip(*rows)) if rows else [()] * len(pick_columns)
    arrays = {name: list(values) for name, values in zip(pick_columns, columns)}
    arrays["ids"] = list(columns[0]) if pick_columns else []
    return arrays


def validate_on_server(conn: psycopg.Connection, strategy: Strategy, seeded: int | None = None) -> ClaimShape:
    """Run every statement once on the seeded tables inside a transaction that is rolled back, and
    return what the claim's rows look like. `seeded`: how many jobs the seed made (bounds `remaining`).

    This catches what only the server can say (syntax, unknown columns, type errors) and checks the
    claim's result shape, before any worker starts. Run it on a connection of its own that is
    closed afterwards (see :func:`pg_claimcheck.engine.driver.run_strategy`): a rollback does not release
    what a statement may take for the session (a session advisory lock, a LISTEN, a setting).
    """
    values: dict[str, object] = {"worker": "claimcheck-validate", "batch": 1, "lease_seconds": 30.0,
                                 "ids": [], "id": 0, "attempts": 0, "error": "validation",
                                 "backoff_unit_s": 10.0, "backoff_cap_s": 3600.0}
    shape = DEFAULT_SHAPE
    pick_columns: tuple[str, ...] = ()
    picked: dict[str, list[Any]] = {}
    section, step = "claim", [0]
    # The BEGIN names the isolation level: through a pooler the transaction's first statement sets its
    # search path (pg_claimcheck.server.runcontext.StatelessConnection), a query, after which a SET
    # TRANSACTION ISOLATION LEVEL is refused ("must be called before any query").
    level = conn.isolation_level
    conn.isolation_level = psycopg.IsolationLevel[strategy.isolation.upper().replace(" ", "_")]
    try:
        with conn.transaction(force_rollback=True):
            conn.execute(pgsql.SQL("SET LOCAL statement_timeout = {}").format(VALIDATION_TIMEOUT_MS))
            for section in RUN_SECTIONS:
                if section not in strategy.statements:
                    continue
                if section == "claim":
                    _check_claim_params(strategy, pick_columns)
                given = {**values, **picked} if section == "claim" else values
                cur = _run_section(conn, strategy, section, given, step)
                if section == "pick":
                    if not cur.description:
                        raise SqlFileError(f"{strategy.where('pick')}: section 'pick' returns no rows; it must "
                                           "end with a SELECT of the jobs to claim (their key first)")
                    pick_columns = tuple(c.name for c in cur.description)
                    picked = pick_params(pick_columns, cur.fetchall())
                elif section == "claim":
                    shape, first = _check_claim_result(strategy, cur, pick_columns)
                    shape = replace(shape, carried=carried_columns(strategy, shape.columns))
                    if first is not None:  # the later sections get a key of the right type
                        values["id"] = first[0]
                        values["attempts"] = first[shape.attempt_index] if shape.attempt_index is not None else 0
                    elif not shape.key_is_int:
                        values["id"] = None
                    values.update({name: first[i] if first is not None else None for name, i in shape.carried})
                elif section == "remaining":
                    _check_remaining(strategy, cur, seeded)
    except errors.QueryCanceled as exc:
        # Our statement_timeout: the statement is not wrong as far as the server said, it did not end.
        table = f" on the {seeded:,} seeded jobs" if seeded is not None else ""
        raise SqlFileError(server_message(
            strategy, section, step[0], exc,
            during=f" once in the validation (rolled back){table}, where it had {VALIDATION_TIMEOUT_MS / 1000:g} s",
            outcome="It did not finish: it waits on something that never comes (a lock another session holds), or "
                    "it is that slow on this table (a claim that takes every queued row, for one; fewer --jobs "
                    "show which). Nothing was run.")) from None
    except psycopg.Error as exc:
        raise SqlFileError(server_message(strategy, section, step[0], exc)) from None
    finally:
        if not conn.broken:  # behind statement pooling a failed statement's message closes the connection
            conn.isolation_level = level  # a shared connection's (explain's) next transactions are its own
    return shape


def _run_section(conn: psycopg.Connection, strategy: Strategy, section: str, values: dict[str, Any],
                 step: list[int]) -> psycopg.Cursor:
    """execute_section, noting in `step` which statement runs (a failure is placed on its line).
    prepare=True: the extended protocol, as the workers use it, one statement at a time."""
    cur = None
    for step[0], (statement, names) in enumerate(strategy.bound_steps[section]):
        cur = conn.execute(statement, {k: values[k] for k in names}, prepare=True)
    assert cur is not None, f"section {section} has no statement"  # the contract: every section has one
    return cur


def _check_claim_params(strategy: Strategy, pick_columns: tuple[str, ...]) -> None:
    unknown = sorted(placeholders(strategy.statements["claim"]) - SECTION_PARAMS["claim"] - set(pick_columns))
    if unknown:
        used = ", ".join("%(" + u + ")s" for u in unknown)
        raise SqlFileError(f"{strategy.where('claim')}: section 'claim' uses {used}, "
                           f"which is neither a claim parameter nor a column of the pick "
                           f"({', '.join(pick_columns) or 'it returns none'})")


def _check_remaining(strategy: Strategy, cur: psycopg.Cursor, seeded: int | None) -> None:
    row = cur.fetchone() if cur.description else None
    count = row[0] if row is not None and isinstance(row[0], int) and not isinstance(row[0], bool) else None
    if count is None or count < 0 or (seeded is not None and count > seeded):
        got = "no row" if row is None else f"{row[0]!r}"
        most = f", at most the {seeded:,} seeded" if seeded is not None else ""
        raise SqlFileError(f"{strategy.where('remaining')}: section 'remaining' must return one row with the "
                           f"number of unfinished jobs (0 or more{most}; for example SELECT count(*) FROM my_jobs); "
                           f"it returned {got}")


def _check_claim_result(strategy: Strategy, cur: psycopg.Cursor, pick_columns: tuple[str, ...]
                        ) -> tuple[ClaimShape, tuple[Any, ...] | None]:
    if not cur.description:
        raise SqlFileError(f"{strategy.where('claim')}: section 'claim' returns no rows; its last statement must "
                           "return the claimed jobs (RETURNING id, attempts: the job's key first)")
    shape = shape_of(cur.description, pick_columns)
    rows = cur.fetchall()
    if rows and isinstance(rows[0][0], (dict, list, tuple, bytes, float)):
        raise SqlFileError(f"{strategy.where('claim')}: section 'claim' returns {type(rows[0][0]).__name__} in "
                           f"its first column ({shape.columns[0]}); it must be the job's key (bigint, int, uuid or text)")
    if shape.attempt_index is not None and rows and rows[0][shape.attempt_index] is not None \
            and not isinstance(rows[0][shape.attempt_index], int):
        column = shape.columns[shape.attempt_index]
        raise SqlFileError(f"{strategy.where('claim')}: section 'claim' returns "
                           f"{type(rows[0][shape.attempt_index]).__name__} in its column {column}; "
                           "it must be the attempt number")
    return shape, (rows[0] if rows else None)


def server_message(strategy: Strategy, section: str, step: int | None, exc: psycopg.Error, sent: str | None = None,
                   offset: int = 0, during: str = "",
                   outcome: str = "Nothing was run; fix the statement and try again.") -> str:
    """A server error in a section's statement `step` (None: which one is not known), placed at its
    file and line, with the server's hint: the one wording of it, for validation, the seed, the
    planner conditions' EXPLAIN and a section that fails at run time. `sent`: the statement as the
    server got it, after `offset` characters of our own (an EXPLAIN or PREPARE in front), when it is
    not the statement with `$n` placeholders; `during`: what we were doing, when that is not running
    it once; `outcome`: what became of the run."""
    diag = exc.diag
    detail = (diag.message_primary or str(exc)).strip().rstrip(".")
    # A statement replayed behind statement pooling shares its message with others: its offset there.
    position = int(diag.statement_position) - getattr(exc, "statement_offset", 0) - offset \
        if diag.statement_position and step is not None else None
    position = position if position and position > 0 else None
    where = f" (at character {position} of the statement)" if position else ""
    hint = f" Hint: {diag.message_hint.strip().rstrip('.')}." if diag.message_hint else ""
    state = f" [{exc.sqlstate}]" if exc.sqlstate and step is None else ""
    return (f"{strategy.where(section, step or 0, position, sent)}: section '{section}' fails on the server"
            f"{during}: {detail}{state}{where}.{hint} {outcome}")
