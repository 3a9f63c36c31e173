"""One module per `claimcheck` verb, named as the verb. Each has `register(verbs)`, which adds its
subparser and sets `func(args, console, err) -> exit code`.

The CLI imports only the verb it runs (a verb loads the layers it needs: the server, the engine,
the report): VERBS lists every verb with its line of `claimcheck --help`, in help order, so the
list is printed without importing any of them.
"""
from __future__ import annotations

import importlib
from types import ModuleType

from pg_claimcheck.libs import ADAPTERS

VERBS = {
    "bench": "claim strategies side by side on one server",
    "check": "the exactly-once verdict for one claim strategy",
    "compare": "differences between two JSON reports; exit 1 on a regression",
    "interleave": "run a spec's sessions step by step and print the trace",
    "faults": "lifecycle under injected faults, lock vs lease, against a fault-free run",
    "lib": f"a queue library's own workers ({', '.join(ADAPTERS)}) under the ledger",
    "vacuum": "dead tuples kept by held transactions (VACUUM VERBOSE), the archive step",
    "notify": "LISTEN/NOTIFY: delivery at commit, folding, payload limit, wake-up latency",
    "idle": "a worker design against an empty queue: would a serverless compute suspend?",
    "explain": "the plan guard: does the claim lock as it picks, through an index?",
    "locustfile": "print the path of claimcheck's locustfile (for locust -f)",
}
"""Verb -> its line in `claimcheck --help`; its module is `pg_claimcheck.commands.<verb>`."""


def load(verb: str) -> ModuleType:
    """The verb's module (imported now, with what it needs)."""
    return importlib.import_module(f"{__name__}.{verb}")
