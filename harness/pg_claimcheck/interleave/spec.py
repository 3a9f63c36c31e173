"""The interleaving spec format: sessions of named one-statement steps, and permutations.

It follows PostgreSQL's isolation tester (`src/test/isolation/specs/*.spec`), plus two step
kinds that know about job queues::

    # seed 000: two sessions run the naive claim
    jobs 20                              # seed the run's jobs table with 20 queued jobs
    setup { UPDATE jobs SET status = 'done' WHERE id > 10 }   # optional, after seeding

    session A
    step  a_begin  { BEGIN }
    claim a_claim  { UPDATE jobs SET status = 'running' WHERE ... RETURNING id, attempts }
    step  a_commit { COMMIT }

    session B
    ...
    permutation a_begin a_claim b_begin b_claim a_commit b_commit

A `claim` step's rows (job id first, attempt second) become the session's claims when its
transaction commits. A `pick` step's first column is kept as the session's `%(ids)s`, which
later steps may use (the select-then-update pattern). With no `permutation` line, every
interleaving that keeps each session's order is run.

Why a parser of our own: the isolation tester's grammar exists only as the flex/bison files of
PostgreSQL's source tree (`specscanner.l`, `specparse.y`), with no Python package that reads
it, and our format adds step kinds and headers it does not have (`claim`, `pick`, `jobs`,
`tables`). The format is line-based with `{ ... }` blocks, so a parser generator (lark,
pyparsing) would add a dependency and a grammar file for what a small tokenizer below reads,
and would not give better errors: each one here names the spec's line and what was expected.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from pg_claimcheck.contract.dialect import refuse_control_characters
from pg_claimcheck.errors import ClaimcheckError, read_input

DEFAULT_JOBS = 20
DEFAULT_MAX_PERMUTATIONS = 10_000
"""`interleave` refuses a spec with more permutations than this unless --max-permutations is raised:
at tens of milliseconds each, 10,000 permutations are minutes; 4 sessions x 6 steps would be millennia."""
STEP_KINDS = ("step", "claim", "pick")
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class SpecError(ClaimcheckError):
    """An interleaving spec that cannot be read or run."""


@dataclass(frozen=True)
class Step:
    """One statement of one session."""

    name: str
    session: str
    kind: str
    """`step`, `claim` (its rows are claims) or `pick` (its ids feed later steps)."""
    sql: str
    line: int


@dataclass(frozen=True)
class Spec:
    """A parsed spec: the jobs to seed, extra setup, sessions' steps in order, permutations."""

    path: str
    jobs: int
    setup: tuple[str, ...]
    sessions: dict[str, tuple[Step, ...]]
    permutations: tuple[tuple[str, ...], ...]
    """Given ones, or empty for every order-keeping interleaving (see :meth:`all_permutations`)."""
    steps: dict[str, Step] = field(default_factory=dict)
    tables: str | None = None
    """A strategy file whose `schema` and `seed` sections build the tables (`tables FILE.sql`),
    instead of claimcheck's `jobs` table; steps may call the functions its schema defines."""

    def permutation_count(self) -> int:
        """How many permutations run: the given ones, or every interleaving (a multinomial
        coefficient, computed without enumerating: 4 sessions x 6 steps have ~2.3e12)."""
        if self.permutations:
            return len(self.permutations)
        count, placed = 1, 0
        for steps in self.sessions.values():
            placed += len(steps)
            count *= math.comb(placed, len(steps))
        return count

    def iter_permutations(self) -> Iterator[tuple[str, ...]]:
        """The permutations, one at a time (never all of them in memory)."""
        if self.permutations:
            return iter(self.permutations)
        return interleavings([[s.name for s in steps] for steps in self.sessions.values()])

    def check_permutation_cap(self, cap: int) -> None:
        """Refuse a spec with more permutations than `cap` before anything runs."""
        count = self.permutation_count()
        if count > cap:
            where = "permutation lines" if self.permutations else "interleavings (no permutation line)"
            raise SpecError(f"{self.path}: {count:,} {where} is more than the cap of {cap:,}; list the "
                            f"permutations you mean with `permutation` lines, or raise --max-permutations")


def interleavings(sequences: list[list[str]]) -> Iterator[tuple[str, ...]]:
    """Every merge of the sequences that keeps each one's order, in a stable order (the first
    sequence's next step first), lazily. Depth-first with an explicit stack: no recursion limit."""
    total = sum(len(seq) for seq in sequences)
    stack: list[tuple[tuple[int, ...], tuple[str, ...]]] = [((0,) * len(sequences), ())]
    while stack:
        cursor, prefix = stack.pop()
        if len(prefix) == total:
            yield prefix
            continue
        for i in reversed(range(len(sequences))):
            if cursor[i] < len(sequences[i]):
                stack.append((cursor[:i] + (cursor[i] + 1,) + cursor[i + 1:], prefix + (sequences[i][cursor[i]],)))


class _Tokens:
    """Words, `{ blocks }` and `#` comments, each with its line number."""

    def __init__(self, text: str, path: str) -> None:
        self.path = path
        self.items: list[tuple[str, str, int]] = []  # (kind, value, line): kind word|block
        i, line, n = 0, 1, len(text)
        while i < n:
            c = text[i]
            if c == "\n":
                line += 1
                i += 1
            elif c.isspace():
                i += 1
            elif c == "#":
                while i < n and text[i] != "\n":
                    i += 1
            elif c == "{":
                start_line, depth, j = line, 1, i + 1
                while j < n and depth:
                    depth += {"{": 1, "}": -1}.get(text[j], 0)
                    line += text[j] == "\n"
                    j += 1
                if depth:
                    raise SpecError(f"{path}:{start_line}: '{{' is never closed")
                self.items.append(("block", text[i + 1:j - 1], start_line))
                i = j
            elif c == "}":
                raise SpecError(f"{path}:{line}: '}}' without a matching '{{'")
            else:
                j = i
                while j < n and not text[j].isspace() and text[j] not in "{}#":
                    j += 1
                self.items.append(("word", text[i:j], line))
                i = j
        self.pos = 0

    def peek(self) -> tuple[str, str, int] | None:
        return self.items[self.pos] if self.pos < len(self.items) else None

    def take(self, expected: str, what: str) -> tuple[str, int]:
        item = self.peek()
        if item is None:
            last = self.items[-1][2] if self.items else 1
            raise SpecError(f"{self.path}:{last}: expected {what} at the end of the file")
        kind, value, line = item
        if kind != expected:
            shown = "a { block }" if kind == "block" else repr(value)
            raise SpecError(f"{self.path}:{line}: expected {what}, found {shown}")
        self.pos += 1
        return value, line


def _statement(sql: str) -> str:
    text = sql.strip()
    return text[:-1].rstrip() if text.endswith(";") else text


def parse_spec(text: str, path: str = "<spec>") -> Spec:
    tokens = _Tokens(text, path)
    jobs, setup, tables = DEFAULT_JOBS, [], None
    sessions: dict[str, list[Step]] = {}
    steps: dict[str, Step] = {}
    permutations: list[tuple[tuple[str, int], ...]] = []
    current: str | None = None
    while tokens.peek() is not None:
        word, line = tokens.take("word", "a keyword (jobs, setup, session, step, claim, pick, permutation)")
        if word == "jobs":
            value, vline = tokens.take("word", "a number of jobs")
            # ASCII digits only: str.isdigit() also accepts '²', which int() then rejects (found by fuzzing)
            if not (value.isascii() and value.isdigit()) or not 1 <= int(value) <= 1_000_000:
                raise SpecError(f"{path}:{vline}: jobs must be a number from 1 to 1000000, got {value!r}")
            jobs = int(value)
        elif word == "tables":
            tables, _ = tokens.take("word", "a strategy file with schema and seed sections after tables")
            tables = str((Path(path).parent / tables) if not Path(tables).is_absolute() and path != "<spec>"
                         and not Path(tables).exists() else Path(tables))
        elif word == "setup":
            block, _ = tokens.take("block", "a { SQL } block after setup")
            setup.append(_statement(block))
        elif word == "session":
            name, nline = tokens.take("word", "a session name")
            if not _NAME_RE.match(name) or name in sessions:
                raise SpecError(f"{path}:{nline}: session name {name!r} is invalid or used twice")
            sessions[name], current = [], name
        elif word in STEP_KINDS:
            if current is None:
                raise SpecError(f"{path}:{line}: '{word}' before any 'session'")
            name, nline = tokens.take("word", f"a name after '{word}'")
            if not _NAME_RE.match(name) or name in steps:
                raise SpecError(f"{path}:{nline}: step name {name!r} is invalid or used twice")
            block, bline = tokens.take("block", f"a {{ SQL }} block for step {name}")
            sql = _statement(block)
            if not sql:
                raise SpecError(f"{path}:{bline}: step {name} has no SQL")
            step = Step(name=name, session=current, kind=word, sql=sql, line=nline)
            steps[name] = step
            sessions[current].append(step)
        elif word == "permutation":
            names = []
            while (nxt := tokens.peek()) is not None and nxt[0] == "word" and nxt[1] not in _KEYWORDS:
                names.append(tokens.take("word", "a step name"))
            if not names:
                raise SpecError(f"{path}:{line}: permutation lists no steps")
            permutations.append(tuple(names))
        else:
            raise SpecError(f"{path}:{line}: unknown keyword {word!r}; expected jobs, setup, session, "
                            f"{', '.join(STEP_KINDS)} or permutation")
    if len(sessions) < 1 or not steps:
        raise SpecError(f"{path}:1: a spec needs at least one session with steps")
    checked = tuple(_check_permutation(p, steps, sessions, path) for p in permutations)
    return Spec(path=path, jobs=jobs, setup=tuple(setup),
                sessions={k: tuple(v) for k, v in sessions.items()}, permutations=checked, steps=steps,
                tables=tables)


_KEYWORDS = {"jobs", "tables", "setup", "session", "permutation", *STEP_KINDS}


def _check_permutation(names: list[tuple[str, int]], steps: dict[str, Step], sessions: dict, path: str
                       ) -> tuple[str, ...]:
    for name, line in names:
        if name not in steps:
            known = ", ".join(steps)
            raise SpecError(f"{path}:{line}: permutation names unknown step {name!r} (steps: {known})")
    return tuple(name for name, _ in names)


def read_spec(path: Path) -> Spec:
    text = read_input(path, SpecError)
    refuse_control_characters(text, str(path), SpecError)
    return parse_spec(text, str(path))


def render_spec(spec: Spec, header: str = "") -> str:
    """A spec as text that parses back to the same spec (used for counterexamples to save)."""
    out = [f"# {line}" for line in header.splitlines()]
    out.append(f"jobs {spec.jobs}")
    if spec.tables:
        out.append(f"tables {spec.tables}")
    out += [f"setup {{ {sql} }}" for sql in spec.setup]
    for session, steps in spec.sessions.items():
        out.append("")
        out.append(f"session {session}")
        width = max(len(s.name) for s in steps)
        for step in steps:
            out.append(f"{step.kind:<5} {step.name:<{width}} {{ {' '.join(step.sql.split())} }}")
    for permutation in spec.permutations:
        out.append("")
        out.append("permutation " + " ".join(permutation))
    return "\n".join(out) + "\n"
