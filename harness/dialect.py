"""The SQL text dialect of strategy files: `%(name)s` parameters and statement boundaries.

One module owns it, so the checker (:mod:`claimcheck.sqlfile`), the worker's libpq path
(:mod:`claimcheck.fastpath`) and the pgbench script writer (:mod:`claimcheck.pgbench`) read a
statement the same way. Parameters are psycopg's named dialect: `%(name)s`, and a literal `%` is
written `%%`. A section may hold several statements; :func:`split_statements` cuts it at the
semicolons that end a statement, not those inside quotes, dollar quotes (`DO $$ ... $$`, function
bodies) or comments.
"""
from __future__ import annotations

import re
from typing import Callable

PARAM_RE = re.compile(r"%\((?P<name>[^)]*)\)s")
_POSITIONAL_RE = re.compile(r"%s|%b|%t")
_DOLLAR_TAG_RE = re.compile(r"\$(?:[A-Za-z_][A-Za-z_0-9]*)?\$")


def placeholders(sql: str) -> set[str]:
    """The names of the `%(name)s` placeholders in a statement."""
    return {m.group("name") for m in PARAM_RE.finditer(sql)}


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


def split_statements(sql: str) -> list[tuple[str, int]]:
    """The statements of a section, each with its 0-based line offset in `sql`; trailing `;` removed.

    Aware of '...' and E'...' strings, "identifiers", $tag$ dollar quotes, -- and /* */ comments,
    so a `DO` block or a `CREATE FUNCTION` body stays one statement.
    """
    out: list[tuple[str, int]] = []
    i, n, start = 0, len(sql), 0
    while i < n:
        c = sql[i]
        if c == "-" and sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end < 0 else end + 1
        elif c == "/" and sql.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if sql.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif sql.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c in "'\"":
            escapes = c == "'" and i > 0 and sql[i - 1] in "eE" and (i < 2 or not (sql[i - 2].isalnum() or sql[i - 2] == "_"))
            i += 1
            while i < n:
                if escapes and sql[i] == "\\":
                    i += 2
                    continue
                if sql[i] == c:
                    if i + 1 < n and sql[i + 1] == c:  # a doubled quote inside the literal
                        i += 2
                        continue
                    break
                i += 1
            i += 1
        elif c == "$" and (i == 0 or not (sql[i - 1].isalnum() or sql[i - 1] == "_")):
            tag = _DOLLAR_TAG_RE.match(sql, i)
            if tag:
                end = sql.find(tag.group(0), tag.end())
                i = n if end < 0 else end + len(tag.group(0))
            else:
                i += 1
        elif c == ";":
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
    text = re.sub(r"/\*.*?\*/", "", piece, flags=re.DOTALL)
    return any(line.strip() and not line.strip().startswith("--") for line in text.splitlines())
