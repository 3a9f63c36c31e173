"""Reading `.sql` files of named statements: the strategy contract and our own queries.

A file is a few optional `-- key: value` headers, then sections, each opened by a
`-- name: SECTION` line and holding one or more statements with `%(param)s` placeholders::

    -- isolation: read committed
    -- name: claim
    UPDATE jobs SET ... RETURNING id, attempts;

This module only splits and checks the text; whether the SQL runs is the server's call
(see :func:`claimcheck.contract.strategy.validate_on_server`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from claimcheck.contract.dialect import has_positional, placeholders
from claimcheck.errors import SqlFileError, read_input

_SECTION_RE = re.compile(r"^\s*--\s*name\s*:\s*(?P<name>\S+)\s*$", re.IGNORECASE)
_HEADER_RE = re.compile(r"^\s*--\s*(?P<key>[a-z_]+)\s*:\s*(?P<value>.*?)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Section:
    """One named statement of a file."""

    name: str
    """The word after `-- name:`."""
    sql: str
    """The section's text, trailing semicolon removed, `%(param)s` placeholders kept."""
    line: int
    """1-based line of the `-- name:` header, for error messages."""

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

    Other comments before the first section are ignored, so a file may carry prose.
    """
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
        sections[name] = Section(name=name, sql=sql, line=line)

    for number, raw in enumerate(text.splitlines(), start=1):
        match = _SECTION_RE.match(raw)
        if match:
            close()
            name = match.group("name").lower()
            if name in sections or (current and current[0] == name):
                raise SqlFileError(f"{path}:{number}: section '{name}' appears twice")
            current, body = (name, number), []
            continue
        if current is None:
            header = _HEADER_RE.match(raw)
            if header and header.group("key").lower() in header_keys:
                headers[header.group("key").lower()] = header.group("value")
            continue
        body.append(raw)
    close()
    return SqlFile(path=path, headers=headers, sections=sections)


def read_sql_file(path: Path, header_keys: frozenset[str] = frozenset()) -> SqlFile:
    return parse_sql_text(read_input(path, SqlFileError), path, header_keys)


def check_params(section: Section, allowed: set[str], path: Path) -> None:
    """Reject placeholders the harness will not supply, and positional ones."""
    unknown = sorted(section.params - allowed)
    if unknown:
        raise SqlFileError(
            f"{path}:{section.line}: section '{section.name}' uses unknown parameter(s) "
            f"{', '.join('%(' + u + ')s' for u in unknown)}; it may use "
            f"{', '.join('%(' + a + ')s' for a in sorted(allowed))}")
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
