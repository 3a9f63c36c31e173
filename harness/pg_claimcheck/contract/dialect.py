"""The SQL text dialect of strategy files: `%(name)s` parameters and statement boundaries.

One module owns it, so the checker (:mod:`pg_claimcheck.contract.sqlfile`), the worker's libpq path
(:mod:`pg_claimcheck.engine.fastpath`) and the pgbench script writer (:mod:`pg_claimcheck.engine.pgbench`) read a
statement the same way. Parameters are psycopg's named dialect: `%(name)s`, and a literal `%` is
written `%%`. A section may hold several statements; :func:`split_statements` cuts it at the
semicolons that end a statement, not those inside quotes, dollar quotes (`DO $$ ... $$`, function
bodies) or comments. A queue library's own statements (the pgbench pass of `claimcheck lib`) come
in psycopg's dialect or in libpq's `$n` form; both are read here too.
"""
from __future__ import annotations

import re
from typing import Callable

PARAM_RE = re.compile(r"%\((?P<name>[^)]*)\)s")
_POSITIONAL_RE = re.compile(r"%s|%b|%t")
_DOLLAR_TAG_RE = re.compile(r"\$(?:[A-Za-z_][A-Za-z_0-9]*)?\$")
_POSITIONAL_NUMBER_RE = re.compile(r"(?<![A-Za-z0-9_$])\$(?P<n>[0-9]+)(?![0-9])")
_CUT_RE = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")
"""Control characters a file may not hold: libpq sends a statement as a C string, so it ends at a NUL
and the server would judge only what comes before; the others are whitespace to no one (tab, newline,
carriage return and form feed are PostgreSQL's whitespace) and most likely a paste or encoding accident."""


def refuse_control_characters(text: str, path: str, error: type[Exception]) -> None:
    """Refuse a file's control character as `error`, at `path:line:column`: a NUL would cut the
    statement short unseen (the part after it never judged), so the SQL judged would not be the SQL
    written. Strategy files and interleave specs are both checked here."""
    found = _CUT_RE.search(text)
    if found is None:
        return
    line = text.count("\n", 0, found.start()) + 1
    column = found.start() - (text.rfind("\n", 0, found.start()) + 1) + 1
    if found.group(0) == "\x00":
        what = ("a NUL byte: libpq sends a statement as a C string, which ends at a NUL, so the server would "
                "judge only the part before it")
    else:
        what = f"the control character {found.group(0)!r}, which is no whitespace PostgreSQL reads"
    raise error(f"{path}:{line}:{column}: {what}. Remove it; a value that must hold one is written as an "
                "escape (E'\\x01', chr(1))")


def placeholders(sql: str) -> set[str]:
    """The names of the `%(name)s` placeholders in a statement."""
    return {m.group("name") for m in PARAM_RE.finditer(sql)}


_PERCENT_RE = re.compile(r"%%|%\([^)]*\)[sbt]|%[sbt]|%")


def lone_percent(sql: str) -> int | None:
    """Where the first `%` that begins no placeholder and is no `%%` stands, or None. psycopg reads
    every `%` of a statement it is given parameters for, in quotes and comments too, and refuses the
    statement ("incomplete placeholder"); the harness always gives parameters, so it is never sent."""
    return next((m.start() for m in _PERCENT_RE.finditer(sql) if m.group(0) == "%"), None)


def has_positional(sql: str) -> bool:
    """Does the statement use a positional placeholder (`%s`) outside the named ones and `%%`?"""
    return bool(_POSITIONAL_RE.search(PARAM_RE.sub("", sql.replace("%%", ""))))


def substitute(sql: str, replace: Callable[[str], str]) -> str:
    """Each `%(name)s` replaced by `replace(name)`, and `%%` by `%`: the statement as the server sees it."""
    return PARAM_RE.sub(lambda m: replace(m.group("name")), sql).replace("%%", "%")


def bind_some(sql: str, values: dict[str, str]) -> str:
    """The placeholders named in `values` replaced by their text (already SQL literals); others kept.
    When none is left, `%%` becomes `%` (the statement is then sent without parameters)."""
    bound = PARAM_RE.sub(lambda m: values.get(m.group("name"), m.group(0)), sql)
    return bound if placeholders(bound) else bound.replace("%%", "%")


def to_positional(sql: str) -> tuple[str, tuple[str, ...]]:
    """`%(name)s` placeholders -> `$1..$n` (one number per distinct name), `%%` -> `%`."""
    order: list[str] = []

    def number(name: str) -> str:
        if name not in order:
            order.append(name)
        return f"${order.index(name) + 1}"

    return substitute(sql, number), tuple(order)


def substitute_numbered(sql: str, replace: Callable[[int], str]) -> str:
    """Each `$n` placeholder (libpq's form, 1-based) replaced by `replace(n)`."""
    return _POSITIONAL_NUMBER_RE.sub(lambda m: replace(int(m.group("n"))), sql)


def rows_as_cte(statement: str, name: str, select: str) -> str:
    """`statement`'s rows as the CTE `name`, read by `select`: one statement.

    A statement that begins with WITH keeps its CTEs at the top level and only its final query
    moves into `name`: PostgreSQL allows a data-modifying CTE (`INSERT` into a log table, say) only
    at the top level, so wrapping the whole statement would be refused.
    """
    body = statement.strip().rstrip(";").rstrip()
    end = _end_of_ctes(body)
    if end is None:
        return f"WITH {name} AS (\n{body}\n)\n{select}"
    return f"{body[:end]},\n{name} AS (\n{body[end:].strip()}\n)\n{select}"


def _end_of_ctes(sql: str) -> int | None:
    """Where the final query of a `WITH a AS (...), b AS (...) <query>` begins, or None when the
    statement does not begin with WITH. A top-level `)` followed by `,` or `AS` is inside the CTE
    list (a body, or a CTE's column list); the first one followed by anything else ends it."""
    if not re.match(r"\s*with\b", code_only(sql), re.IGNORECASE):
        return None
    depth, i, n = 0, 0, len(sql)
    while i < n:
        skip = _skip_quoted(sql, i)
        if skip > i:
            i = skip
            continue
        if sql[i] == "(":
            depth += 1
        elif sql[i] == ")":
            depth -= 1
            if depth == 0:
                rest = code_only(sql[i + 1:]).lstrip()
                if not (rest.startswith(",") or re.match(r"as\b", rest, re.IGNORECASE)):
                    return i + 1
        i += 1
    return None


def code_only(sql: str, blank_quotes: bool = False) -> str:
    """`sql` with each comment blanked to a space; quoted literals, identifiers and dollar quotes
    left as they are, or blanked too (`blank_quotes`: only the statement's own words remain)."""
    out, i, n = [], 0, len(sql)
    while i < n:
        skip = _skip_quoted(sql, i)
        if skip > i:
            out.append(" " if blank_quotes or sql.startswith(("--", "/*"), i) else sql[i:skip])
            i = skip
        else:
            out.append(sql[i])
            i += 1
    return "".join(out)


def _skip_quoted(sql: str, i: int) -> int:
    """If a comment, quoted literal, identifier or dollar quote starts at `i`, where it ends; else `i`.

    The one lexer of this module: '...' and E'...' strings (with backslash escapes), "identifiers",
    $tag$ dollar quotes, -- and nested /* */ comments, as PostgreSQL reads them.
    """
    n = len(sql)
    if sql.startswith("--", i):
        end = sql.find("\n", i)
        return n if end < 0 else end + 1
    if sql.startswith("/*", i):
        depth, j = 1, i + 2
        while j < n and depth:
            if sql.startswith("/*", j):
                depth, j = depth + 1, j + 2
            elif sql.startswith("*/", j):
                depth, j = depth - 1, j + 2
            else:
                j += 1
        return j
    if sql[i] in "'\"":
        quote, j = sql[i], i + 1
        escapes = quote == "'" and i > 0 and sql[i - 1] in "eE" and (i < 2 or not (sql[i - 2].isalnum()
                                                                               or sql[i - 2] == "_"))
        while j < n:
            if escapes and sql[j] == "\\":
                j += 2
                continue
            if sql[j] == quote:
                if j + 1 < n and sql[j + 1] == quote:  # a doubled quote inside the literal
                    j += 2
                    continue
                return j + 1
            j += 1
        return n
    if sql[i] == "$" and (i == 0 or not (sql[i - 1].isalnum() or sql[i - 1] == "_")):
        tag = _DOLLAR_TAG_RE.match(sql, i)
        if tag:
            end = sql.find(tag.group(0), tag.end())
            return n if end < 0 else end + len(tag.group(0))
    return i


def split_statements(sql: str) -> list[tuple[str, int]]:
    """The statements of a section, each with its 0-based line offset in `sql`; trailing `;` removed.

    Aware of '...' and E'...' strings, "identifiers", $tag$ dollar quotes, -- and /* */ comments,
    so a `DO` block or a `CREATE FUNCTION` body stays one statement.
    """
    out: list[tuple[str, int]] = []
    i, n, start = 0, len(sql), 0
    while i < n:
        skip = _skip_quoted(sql, i)
        if skip > i:
            i = skip
        elif sql[i] == ";":
            _keep(out, sql, start, i)
            i += 1
            start = i
        else:
            i += 1
    _keep(out, sql, start, n)
    return out


def _keep(out: list[tuple[str, int]], sql: str, start: int, end: int) -> None:
    piece = sql[start:end]
    if not _has_code(piece):
        return
    lead = len(piece) - len(piece.lstrip())
    out.append((piece.strip(), sql.count("\n", 0, start + lead)))


def _has_code(piece: str) -> bool:
    """Is there anything but whitespace and comments?"""
    return bool(code_only(piece).strip())
