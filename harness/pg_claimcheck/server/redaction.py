"""No password in any output: messages, reports, HTML, or a child process's command line.

A DSN may carry a password (`postgresql://user:PW@host/db`, `password=PW`). Everything the
harness prints or writes goes through :func:`scrub`, which hides the password of every DSN it
was told about (:func:`remember`, called where a DSN enters the harness) and any password in
URI or key=value form it recognises, even in a DSN libpq could not parse. Child processes
(pgbench) get the password through the environment (`PGPASSWORD`), never through argv.
"""
from __future__ import annotations

import re
from typing import Any

import psycopg

HIDDEN = "***"
SECRET_KEYS = ("password", "sslpassword")
# user:PASSWORD@ in a URI; the password runs to the last '@' before the host part.
_URI_PASSWORD = re.compile(r"(?P<head>postgres(?:ql)?://[^\s:/@\"']*:)(?P<pw>[^\s\"']*)@", re.IGNORECASE)
# password=VALUE in key=value form or a URI query: one already hidden, a quoted value, a quote never
# closed (libpq refuses the DSN, and the password runs to the end of the line: `password='Xyz 1`),
# or up to whitespace/&/quote.
_KV_PASSWORD = re.compile(r"(?P<head>\b(?:ssl)?password\s*=\s*)"
                          r"(?P<pw>'?\*\*\*'?(?=[\s:,;)]|$)|'(?:[^'\\]|\\.)*'|'[^\n]*|[^\s&\"']+)", re.IGNORECASE)
# The same in a DSN given to us (remember): an unclosed quote's password runs to the DSN's end.
_KV_PASSWORD_IN_DSN = re.compile(r"\b(?:ssl)?password\s*=\s*(?P<pw>'(?:[^'\\]|\\.)*'|'.*|[^\s&\"']+)",
                                 re.IGNORECASE | re.DOTALL)
_known: set[str] = set()


def remember(dsn: str | None) -> None:
    """Note the secrets of a DSN, so that they are hidden wherever they turn up later."""
    if not dsn:
        return
    for value in _secrets(dsn):
        if len(value) >= 3:  # a one- or two-character password would blot out ordinary text
            _known.add(value)


def _secrets(dsn: str) -> list[str]:
    try:
        params = psycopg.conninfo.conninfo_to_dict(dsn)
        found = [str(params[k]) for k in SECRET_KEYS if params.get(k)]
    except psycopg.Error:
        found = []
    found += [m.group("pw").strip("'") for m in _URI_PASSWORD.finditer(dsn)]
    found += [m.group("pw").strip("'") for m in _KV_PASSWORD_IN_DSN.finditer(dsn)]
    return [f for f in found if f and f != HIDDEN]


def scrub(text: str) -> str:
    """`text` with every password hidden."""
    # Known secrets first: one whose quote was never closed is hidden by itself, and the message
    # after it (libpq's reason) stays readable.
    for secret in sorted(_known, key=len, reverse=True):
        # As a whole token only: a password like "postgres" must not mangle "postgresql://" or a report key.
        text = re.sub(rf"(?<![A-Za-z0-9_]){re.escape(secret)}(?![A-Za-z0-9_])", HIDDEN, text)
    text = _URI_PASSWORD.sub(lambda m: f"{m.group('head')}{HIDDEN}@", text)
    return _KV_PASSWORD.sub(lambda m: f"{m.group('head')}{HIDDEN}", text)


def scrub_all(value: Any) -> Any:
    """A JSON-like document with every string value in it scrubbed (keys are ours, and stay)."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {k: scrub_all(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub_all(v) for v in value]
    return value


def redact_dsn(dsn: str) -> str:
    """The DSN with any password hidden, fit for a message or a report."""
    try:
        params = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.Error:
        return scrub(dsn)
    for key in SECRET_KEYS:
        if key in params:
            params[key] = HIDDEN
    return psycopg.conninfo.make_conninfo(**params)


def split_password(dsn: str) -> tuple[str, str | None]:
    """(the DSN without its password, the password): for a child process's argv and environment."""
    params = psycopg.conninfo.conninfo_to_dict(dsn)
    password = params.pop("password", None)
    return psycopg.conninfo.make_conninfo(**params), (str(password) if password is not None else None)
