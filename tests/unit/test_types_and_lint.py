"""The type check and the lint allow no new errors: `mypy` (pyproject's `[tool.mypy]`: strict on
`contract/` and `verdict/`, the rest with mypy's defaults) and `ruff check` over the package report at
most the counts held here. Lower a count when you fix errors (the test says so); never raise it.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MYPY_ERRORS = 171
"""`mypy` over harness/pg_claimcheck, 0 of them in contract/ and verdict/ (162 when the count was first held,
186 with the idle probe and the check budget merged in beside it, 181 once the backends' `backend_pid` was
typed and a pooled connection had a name of its own, 179 once the use cases moved to app/)."""
RUFF_ERRORS = 127
"""`ruff check harness/pg_claimcheck` with pyproject's `[tool.ruff]` rules (155 when the count was first held,
169 with the idle probe and the check budget merged in beside it, 128 once the import blocks the package's
rename to pg_claimcheck touched were re-sorted, 127 once the use cases moved to app/)."""
STRICT = ("harness/pg_claimcheck/contract/", "harness/pg_claimcheck/verdict/")


def tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (the test extra has it)")
    return found


def held(count: int, limit: int, what: str, output: str) -> None:
    assert count <= limit, f"{what}: {count} errors, {limit} allowed: fix the new ones\n{output[-4000:]}"
    if count < limit:
        print(f"{what}: {count} errors, fewer than the {limit} held in {__file__}: lower the count")


def test_mypy_finds_no_new_errors_and_none_in_the_strict_layers() -> None:
    done = subprocess.run([tool("mypy")], cwd=ROOT, capture_output=True, text=True, timeout=600)
    found = re.search(r"Found (\d+) errors?", done.stdout)
    count = int(found.group(1)) if found else 0
    assert found or "Success" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
    strict = [line for line in done.stdout.splitlines() if line.startswith(STRICT) and ": error:" in line]
    assert not strict, "\n".join(strict)
    held(count, MYPY_ERRORS, "mypy", done.stdout)


def test_ruff_finds_no_new_errors() -> None:
    done = subprocess.run([tool("ruff"), "check", "harness/pg_claimcheck", "--output-format", "concise", "--no-cache"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    found = re.search(r"Found (\d+) errors?", done.stdout)
    count = int(found.group(1)) if found else 0
    assert found or "All checks passed" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
    held(count, RUFF_ERRORS, "ruff", done.stdout)
