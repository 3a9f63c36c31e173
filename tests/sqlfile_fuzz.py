"""The SQL-file fuzz (issue 25): files built from the contract's pieces (docs/contracts.md, section
1), shared by tests/unit/test_sqlfile_fuzz.py and tests/benchmarks/fuzz_cli.py.

A file is a list of pieces, each known to be allowed or not by the contract, so `defects` says,
without the code's parser, whether the file must be refused before it reaches the server. Bodies
that only the server can judge (a syntax error, a claim returning the wrong columns) are marked
`server_bad`: a run must refuse them too (exit 2), never judge them (0 or 1).
"""
from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

SKIP_LOCKED = ("WITH next AS (SELECT id FROM jobs WHERE status = 'queued' ORDER BY id LIMIT %(batch)s\n"
               "              FOR UPDATE SKIP LOCKED)\n"
               "UPDATE jobs j SET status = 'running', attempts = j.attempts + 1 FROM next WHERE j.id = next.id\n"
               "RETURNING j.id, j.attempts;")
NAIVE = ("UPDATE jobs SET status = 'running', attempts = attempts + 1\n"
         "WHERE id IN (SELECT id FROM jobs WHERE status = 'queued' ORDER BY id LIMIT %(batch)s)\n"
         "RETURNING id, attempts;")
FENCED = "UPDATE jobs SET status = 'done' WHERE id = %(id)s AND status = 'running' AND attempts = %(attempts)s;"


@dataclass(frozen=True)
class Piece:
    text: str
    defect: str | None = None
    """Why the contract refuses it before any server is asked, or None."""
    server_bad: bool = False
    """Only the server can refuse it (validation must, before any worker starts)."""


HEADERS = [
    Piece("-- isolation: serializable"), Piece("-- isolation: repeatable read"), Piece("-- lifecycle: shared"),
    Piece("-- expected: safe"), Piece("-- source: somewhere"),
    Piece("-- isolation: fast", "an isolation that is not a level"),
    Piece("-- isolaton: serializable", "a misspelled header"),
    Piece("-- lifecycel: shared", "a misspelled header"),
    Piece("-- priority: high"), Piece("-- Author: someone"),  # prose: not one edit from a header
    Piece("-- lifecycle: private", "a lifecycle other than shared"),
]
BODIES = {
    "claim": [Piece(SKIP_LOCKED), Piece(NAIVE),
              Piece(SKIP_LOCKED.replace("%(batch)s", "%(limit)s"), "an unknown parameter"),
              Piece(SKIP_LOCKED.replace("%(batch)s", "%s"), "a positional placeholder"),
              Piece(SKIP_LOCKED.replace("RETURNING j.id, j.attempts", "RETURNING j.id, j.nosuch"), server_bad=True),
              Piece(NAIVE.replace("RETURNING id, attempts", ""), server_bad=True),  # returns no rows
              Piece(NAIVE.replace("RETURNING id, attempts", "RETURNING payload, attempts"), server_bad=True),
              Piece("UPDATE jobs SET WHERE;", server_bad=True)],
    "complete": [Piece(FENCED), Piece(FENCED.replace("%(attempts)s", "%(attempt)s"), "an unknown parameter"),
                 Piece(FENCED.replace("status = 'done'", "statuz = 'done'"), server_bad=True),
                 Piece("-- only a comment", "a section with no SQL"),
                 Piece(FENCED.replace(";", "\x00 AND false;"), "a NUL byte")],
    "finish": [Piece(FENCED, "an unknown section")],
}
SECTION_LINES = [
    ("-- name: {name}", None), ("--name:{name}", None), ("  -- NAME: {name}", None),
    ("-- name: {name}  (optional)", "a section line with trailing text"),
    ("-- nmae: {name}", "a misspelled section line"),
]


def _mostly_fine(pieces: list) -> st.SearchStrategy:
    """Half the draws from the pieces the contract allows: a file has several pieces, and one bad
    one refuses it, so uniform draws would rarely make a file that is read."""
    fine = [p for p in pieces if not (p[1] if isinstance(p, tuple) else p.defect)]
    return st.one_of(st.sampled_from(fine), st.sampled_from(pieces)) if fine else st.sampled_from(pieces)


@st.composite
def files(draw) -> tuple[str, list[str], bool]:
    """(text, the contract's defects found in it, whether only the server can refuse it)."""
    defects: list[str] = []
    server_bad = False
    lines: list[str] = []
    headers = draw(st.lists(_mostly_fine(HEADERS), max_size=3, unique_by=lambda p: p.text.split(":")[0]))
    for header in headers:
        lines.append(header.text)
        defects += [header.defect] if header.defect else []
    if draw(st.booleans()):
        lines += ["--", "-- Prose: below the headers, after a bare line: timeout: none"]
    names = draw(st.lists(st.sampled_from(["claim", "claim", "complete", "finish"]), min_size=1, max_size=3))
    seen: set[str] = set()
    for index, name in enumerate(names):
        form, line_defect = draw(_mostly_fine(SECTION_LINES))
        body = draw(_mostly_fine(BODIES[name]))
        if index and not draw(st.integers(0, 3)):
            # Inside the previous section, where it would be a comment that changes nothing.
            lines.append("-- isolation: serializable")
            defects.append("isolation inside a section")
        if line_defect:
            defects.append(line_defect)
        else:
            if name in seen:
                defects.append("a section twice")
            seen.add(name)
            defects += [body.defect] if body.defect else []
            server_bad = server_bad or body.server_bad
        lines += [form.format(name=name), body.text, ""]
    if "claim" not in seen:
        defects.append("no claim section")
    return "\n".join(lines) + "\n", defects, server_bad
