"""How many rows one claim asks for: the bound an over-claim is judged against.

A claim that takes `%(batch)s` asks for `--batch` jobs. A claim written with its own number
(Hasura's `... LIMIT 100`, delayed_job's `LIMIT 1`) asks for that number whatever `--batch` says:
judging it against `--batch` would call a claim that took exactly what it asked for an over-claim.
A claim whose text shows neither (a function call, `LIMIT ALL`, a limit computed on the server)
asks for a number claimcheck cannot know: over-claims are then not judged, and the report says so.
The pick, when there is one, is part of the claim's text: a pick that limits what a claim takes
`= ANY(%(ids)s)` is where its limit is written.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pg_claimcheck.contract.dialect import code_only, placeholders

_LIMIT_RE = re.compile(r"\bLIMIT\s+(?P<limit>\S+)|\bFETCH\s+(?:FIRST|NEXT)\s+(?P<fetch>\S+\s+)?ROWS?\b",
                       re.IGNORECASE)
_NUMBER_RE = re.compile(r"\(*\s*(\d+)\s*\)*;?$")

BATCH, LITERAL, UNKNOWN = "batch", "literal", "unknown"


@dataclass(frozen=True)
class ClaimLimit:
    """The most rows one claim may return without taking more than it asked for."""

    rows: int | None
    """None: the limit cannot be known from the claim's text; over-claims are not judged."""
    source: str
    """`batch` (the claim takes %(batch)s), `literal` (a LIMIT written in its text) or `unknown`."""

    def describe(self) -> str:
        if self.source == BATCH:
            return f"{self.rows} (--batch)"
        if self.source == LITERAL:
            return f"{self.rows} (the LIMIT written in the claim)"
        return "unknown"

    def as_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "from": self.source}


def literal_limits(sql: str) -> list[int | None]:
    """Each LIMIT (or FETCH FIRST) of a statement outside comments and quotes, in order: its number
    when written as one, None when it is not (`LIMIT ALL`, `LIMIT %(n)s`, `LIMIT (SELECT ...)`).
    A dollar-quoted body (a function defined inline) is not the statement's own text."""
    found: list[int | None] = []
    for m in _LIMIT_RE.finditer(code_only(sql, blank_quotes=True)):
        text = m.group("limit") if m.group("limit") is not None else (m.group("fetch") or "1")
        number = _NUMBER_RE.match(text.strip())
        found.append(int(number.group(1)) if number else None)
    return found


def claim_limit(statements: dict[str, str], batch: int) -> ClaimLimit:
    """The claim's limit, from the text of its `pick` and `claim` sections."""
    texts = [statements[s] for s in ("pick", "claim") if s in statements]
    if any("batch" in placeholders(text) for text in texts):
        return ClaimLimit(batch, BATCH)
    limits = [n for text in texts for n in literal_limits(text)]
    known = [n for n in limits if n is not None]
    if not limits or len(known) < len(limits):
        return ClaimLimit(None, UNKNOWN)
    # The largest: a claim may hold a small scalar subquery (`= (SELECT ... LIMIT 1)`) beside the
    # limit of the jobs it takes; never judged against less than any number it was written with.
    return ClaimLimit(max(known), LITERAL)
