"""The trace of a permutation, printed in the isolation tester's spirit."""
from __future__ import annotations

import re

from pg_claimcheck.interleave.stepper import PermutationResult, StepResult

_WAIT_RE = re.compile(r"\(waited \d+ ms\)")


def one_line(sql: str) -> str:
    return " ".join(sql.split())


def table(result: StepResult) -> list[str]:
    if not result.columns:
        return []
    cells = [[("" if v is None else str(v)) for v in row] for row in result.rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) if cells else len(c)
              for i, c in enumerate(result.columns)]
    lines = ["|".join(c.ljust(w) for c, w in zip(result.columns, widths)),
             "+".join("-" * w for w in widths)]
    lines += ["|".join(v.rjust(w) for v, w in zip(row, widths)) for row in cells]
    lines.append(f"({len(cells)} row{'s' if len(cells) != 1 else ''})")
    return lines


def _outcome(result: StepResult) -> list[str]:
    if result.error is not None:
        return [f"ERROR:  {result.error}"]
    return table(result)


def render(result: PermutationResult) -> list[str]:
    lines = [f"starting permutation: {' '.join(result.permutation)}"]
    for kind, item in result.events:
        if kind == "invalid":
            lines.append(f"invalid permutation detected: {item}")
            continue
        assert isinstance(item, StepResult)
        name, sql = item.step.name, one_line(item.step.sql)
        if kind == "ran":
            lines.append(f"step {name}: {sql}")
            lines += _outcome(item)
        elif kind == "waiting":
            lines.append(f"step {name}: {sql} <waiting ...>")
        elif kind == "completed":
            lines.append(f"step {name}: <... completed> (waited {item.waited_ms:.0f} ms)")
            lines += _outcome(item)
        elif kind == "cancelled":
            lines.append(f"step {name}: <... cancelled: still blocked after the timeout or at the end>")
    lines.append(ownership_line(result))
    doubles = result.double_claims
    if doubles:
        lines.append("DOUBLE CLAIM: " + "; ".join(
            f"job {job} owned by {' and '.join(f'{s} (attempt {a})' for s, a in owners)}"
            for job, owners in doubles.items()))
    lines.append("")
    return lines


def ownership_line(result: PermutationResult) -> str:
    by_session: dict[str, list[int]] = {}
    for job, owners in sorted(result.owned.items()):
        for session, _ in owners:
            by_session.setdefault(session, []).append(job)
    if not by_session:
        return "claims: none committed"
    return "claims: " + "; ".join(f"{s} owns {', '.join(map(str, jobs))}" for s, jobs in sorted(by_session.items()))


def normalize(text: str) -> str:
    """Trace text with wait times masked, for comparison with golden files."""
    return _WAIT_RE.sub("(waited N ms)", text)
