"""Fuzz tests' examples counted by outcome, shown after the run (not asserted): see tests/conftest.py.

Each fuzz test records its counts on itself, as a user property of its own report. A module-global
read by a later test of the module (a `test_zz_...`) is wrong under `pytest -n 2 --dist worksteal`:
that test may run in another worker, which saw none of the examples, or before the fuzz ends.
"""
from __future__ import annotations

SEEN: dict[str, dict[str, int]] = {}


def count_example(request, name: str, outcome: str) -> None:
    """One more example of the fuzz test `request` runs, under `name`, ended by `outcome`."""
    seen = SEEN.setdefault(name, {"examples": 0})
    seen["examples"] += 1
    seen[outcome] = seen.get(outcome, 0) + 1
    request.node.user_properties[:] = [(name, dict(seen))]
