"""Reading `.sql` files of named statements: the strategy contract and our own queries.

A file is a few optional `-- key: value` headers, then sections, each opened by a
`-- name: SECTION` line and holding one or more statements with `%(param)s` placeholders::

    -- isolation: read committed
    -- name: claim
    UPDATE jobs SET ... RETURNING id, attempts;

This module only splits and checks the text; whether the SQL runs is the server's call
(see :func:`pg_claimcheck.contract.strategy.validate_on_server`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pg_claimcheck.contract.dialect import (
    PARAM_RE,
    has_positional,
    lone_percent,
    placeholders,
    refuse_control_characters,
)
from pg_claimcheck.errors import SqlFileError, read_input

_SECTION_RE = re.compile(r"^\s*--\s*name\s*:\s*(?P<name>\S*)\s*(?P<rest>.*?)\s*$", re.IGNORECASE)
_HEADER_RE = re.compile(r"^\s*--\s*(?P<key>[a-z_]+)\s*:\s*(?P<value>.*?)\s*$", re.IGNORECASE)
BEHAVIOUR_KEYS = ("isolation", "lifecycle")
"""Headers that change how a run goes: one of them where no header is read (inside a section) is an
error, not a comment."""


@dataclass(frozen=True)
class Section:
    """One named statement of a file."""

    name: str
    """The word after `-- name:`."""
    sql: str
    """The section's text, trailing semicolon removed, `%(param)s` placeholders kept."""
    line: int
    """1-based line of the `-- name:` header, for error messages."""
    sql_line: int = 0
    """1-based line where the section's SQL starts (the server's errors are placed from it)."""

    @property
    def params(self) -> set[str]:
        return placeholders(self.sql)



@dataclass(frozen=True)
class SqlFile:
    """A parsed file: its headers (before the first section) and its sections in order."""

    path: Path
    headers: dict[str, str]
    sections: dict[str, Section]


def parse_sql_text(text: str, path: Path, header_keys: frozenset[str] = frozenset()) -> SqlFile:
    """Split `text` into headers and sections; only `header_keys` are read as headers.

    A section line is `-- name: SECTION` and nothing else. With `header_keys` (a strategy file), a
    `-- key:` line anywhere that is one edit from a header (`isolaton`) or from `name` is refused: a
    misspelled header would otherwise be silently ignored and the run go on with the wrong settings.
    Any other `-- word:` line is prose (`-- Author: ...`). A control character is refused where it
    stands (:func:`pg_claimcheck.contract.dialect.refuse_control_characters`).
    """
    refuse_control_characters(text, str(path), SqlFileError)
    headers: dict[str, str] = {}
    sections: dict[str, Section] = {}
    current: tuple[str, int] | None = None
    body: list[str] = []

    def close() -> None:
        if current is None:
            return
        name, line = current
        sql = _strip_statement("\n".join(body))
        if not sql:
            raise SqlFileError(f"{path}:{line}: section '{name}' has no SQL under it")
        blank = next(i for i, text in enumerate(body) if text.strip())  # lines strip() removes
        sections[name] = Section(name=name, sql=sql, line=line, sql_line=line + 1 + blank)

    for number, raw in enumerate(text.splitlines(), start=1):
        match = _SECTION_RE.match(raw)
        if match:
            close()
            name = _section_name(match, path, number)
            if name in sections or (current and current[0] == name):
                raise SqlFileError(f"{path}:{number}: section '{name}' appears twice")
            current, body = (name, number), []
            continue
        header = _HEADER_RE.match(raw)
        if header_keys and header:
            _check_key(header.group("key").lower(), header_keys, current is not None, path, number)
        if current is None:
            if header and header.group("key").lower() in header_keys:
                headers[header.group("key").lower()] = header.group("value")
            continue
        body.append(raw)
    close()
    return SqlFile(path=path, headers=headers, sections=sections)


def _section_name(match: re.Match[str], path: Path, number: int) -> str:
    name: str | None = match.group("name")
    rest: str | None = match.group("rest")
    if not name or rest:
        found = f"{name} {rest}".strip()
        raise SqlFileError(f"{path}:{number}: a section line is `-- name: SECTION` and nothing else; this one has "
                           f"{found!r} after `name:`" + (f" (remove {rest!r})" if name and rest else ""))
    return name.lower()


def _check_key(key: str, header_keys: frozenset[str], in_section: bool, path: Path, number: int) -> None:
    """Refuse a `-- key:` line meant as a header or a section line that would not be read as one."""
    if key in header_keys:
        if in_section and key in BEHAVIOUR_KEYS:
            raise SqlFileError(f"{path}:{number}: the header '{key}' is inside a section, where it is a comment "
                               "and changes nothing; headers go before the first `-- name:` line")
        return
    near = [k for k in sorted(header_keys | {"name"}) if _one_edit(key, k)]
    if near:
        raise SqlFileError(f"{path}:{number}: unknown header '{key}': did you mean '{near[0]}'? "
                           f"The headers are {', '.join(sorted(header_keys))} (docs/contracts.md, section 1)")
    # Any other `-- word:` line is prose (`-- Author: ...`, `-- why: ...`), wherever it stands.


def _one_edit(a: str, b: str) -> bool:
    """`a` and `b` differ by one insertion, deletion, substitution or swap of neighbours."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]]
                                  and a[diff[1]] == b[diff[0]])
    short, long = sorted((a, b), key=len)
    return any(long[:i] + long[i + 1:] == short for i in range(len(long)))


def read_sql_file(path: Path, header_keys: frozenset[str] = frozenset()) -> SqlFile:
    return parse_sql_text(read_input(path, SqlFileError), path, header_keys)


def check_params(section: Section, allowed: set[str], path: Path, beyond: str = "") -> None:
    """Reject placeholders the harness will not supply, positional ones and a lone `%`, each at its own line.
    `beyond`: what else the section may use, in words."""
    def line_of(index: int) -> int:
        return (section.sql_line or section.line) + section.sql.count("\n", 0, index)

    unknown = sorted(section.params - allowed)
    if unknown:
        first = min(m.start() for m in PARAM_RE.finditer(section.sql) if m.group("name") in unknown)
        raise SqlFileError(
            f"{path}:{line_of(first)}: section '{section.name}' uses unknown parameter(s) "
            f"{', '.join('%(' + u + ')s' for u in unknown)}; it may use "
            f"{', '.join('%(' + a + ')s' for a in sorted(allowed))}{beyond}")
    lone = lone_percent(section.sql)
    if lone is not None:
        raise SqlFileError(
            f"{path}:{line_of(lone)}: section '{section.name}' has a lone '%', which psycopg refuses: "
            f"\"incomplete placeholder: '%'\". Write a literal percent sign as %% (in quotes and comments too)")
    if has_positional(section.sql):
        raise SqlFileError(
            f"{path}:{section.line}: section '{section.name}' has a positional placeholder (%s); "
            f"use named ones like %(worker)s, and write a literal percent sign as %%")


def _strip_statement(sql: str) -> str:
    lines = [line for line in sql.strip().splitlines()]
    while lines and (not lines[-1].strip() or lines[-1].strip().startswith("--")):
        lines.pop()
    text = "\n".join(lines).strip()
    return text[:-1].rstrip() if text.endswith(";") else text


def load_queries(path: Path) -> dict[str, str]:
    """Our own query files: name -> SQL, for code that refers to queries by name."""
    return {name: section.sql for name, section in read_sql_file(path).sections.items()}
