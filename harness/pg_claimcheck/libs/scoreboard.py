"""The libraries' scoreboard (`claimcheck bench --libs all --scoreboard`): every installed library
side by side, each held to its own promise, one row per library.

Per library: a healthy run at each worker count (with `--pgbench`, its own SQL through pgbench, the
ratio of its jobs/s to pgbench's), each fault kind alone (FAULT_KINDS, FAULT_WORKERS workers: one
broken promise in a run of every kind would hide which fault broke it), and one run fed through
its own enqueue API at RATE_PER_S for RATE_S seconds while its workers work. Each cell is the
verdict by the library's own promise with one line of evidence; every run is also an ordinary
run of the report (JSON, HTML), so the evidence behind a cell is there in full.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from rich.console import Console
from rich.table import Table

from pg_claimcheck.errors import UsageError
from pg_claimcheck.libs import ADAPTERS, LibraryMissing, load_adapter
from pg_claimcheck.libs._adapter import LibraryAdapter
from pg_claimcheck.libs.runner import lib_settings
from pg_claimcheck.settings import FaultPlan, RunSettings
from pg_claimcheck.verdict.result import RunResult

FAULT_KINDS = {
    "kill": FaultPlan(kills=2, terminates=0, stalls=0, restarts=0),
    "terminate": FaultPlan(kills=0, terminates=2, stalls=0, restarts=0),
    "stall": FaultPlan(kills=0, terminates=0, stalls=2, restarts=0),
    "restart": FaultPlan(kills=0, terminates=0, stalls=0, restarts=1),
}
"""Each fault kind alone: two of each (one restart, which needs a server claimcheck started)."""
FAULT_WORKERS = 4
RATE_PER_S = 20.0
RATE_S = 3.0
RATE_JOBS = 10
"""The fed run: RATE_JOBS enqueued first, then RATE_PER_S for RATE_S seconds, 2 workers."""


def installed_libraries(err: Console) -> list[LibraryAdapter]:
    """`--libs all`: every library whose adapter loads here (its library installed, its runtime found);
    each one that does not is named with its reason, and the run goes on without it."""
    found = []
    for name in ADAPTERS:
        try:
            found.append(load_adapter(name))
        except (LibraryMissing, UsageError) as exc:
            err.print(f"  --libs all: {name} left out: {str(exc).split('. ')[0]}", highlight=False, markup=False)
    if not found:
        raise UsageError("--libs all: no queue library is installed here (docs/libraries.md says how to install each)")
    return found


@dataclass
class Plan:
    """The scoreboard's runs of one library, labelled by column."""

    adapter: LibraryAdapter
    runs: list[tuple[str, RunSettings]] = field(default_factory=list)


def plans(adapters: list[LibraryAdapter], healthy: list[RunSettings]) -> list[Plan]:
    """Each library's runs: `healthy` (bench's own grid of worker counts, with its jobs, work and duration),
    then each fault kind alone, then a fed run."""
    out = []
    for adapter in adapters:
        plan = Plan(adapter)
        plan.runs += [(f"{s.workers}w", s) for s in healthy]
        fault_jobs = min(max(s.jobs for s in healthy), 1000)
        plan.runs += [(kind, dataclasses.replace(lib_settings(FAULT_WORKERS, fault_jobs, faults=True), faults=kinds))
                      for kind, kinds in FAULT_KINDS.items()]
        if adapter.feeds:
            plan.runs.append(("rate", lib_settings(2, RATE_JOBS, duration_s=RATE_S, rate_per_s=RATE_PER_S)))
        out.append(plan)
    return out


HELD, BROKEN, NOT_INJECTED = "held", "BROKEN", "not injected"
"""A cell's verdict: the library's promise held, broke, or the column's fault never landed (nothing to judge)."""


def cell(label: str, result: RunResult) -> tuple[str, str]:
    """A cell: the verdict by the library's promise (HELD, BROKEN, NOT_INJECTED) and one line of what shows it."""
    v = result.verdict
    if label in FAULT_KINDS and not result.faults:
        return NOT_INJECTED, ("; ".join(result.faults_skipped) or "no live worker")[:80]
    if not result.exactly_once:
        kinds = sorted({x.kind for x in v.violations})
        said = [f"{', '.join(kinds) or result.stopped_by}"]
        if v.double_claimed_jobs:
            said.append(f"{v.double_claimed_jobs} run twice")
        if v.unclaimed_jobs:
            said.append(f"{v.unclaimed_jobs} lost")
        if result.unfinished_jobs:
            said.append(f"{result.unfinished_jobs} left unfinished")
        return BROKEN, "; ".join(said)
    if label == "rate" and result.producer is not None:
        p99 = result.producer.pickup_latency_ms.get("p99")
        return HELD, f"{result.producer.enqueued} fed" + (f", pickup p99 {p99:,.0f} ms" if p99 is not None else "")
    if label in FAULT_KINDS:
        return HELD, f"{v.redeliveries} redelivered, {result.table.failed if result.table else 0} failed"
    return HELD, f"{result.throughput_jobs_per_s:,.0f} jobs/s" + (
        f", pgbench ratio {result.pgbench_ratio:.2f}" if result.pgbench_ratio else "")


def evidence(label: str, result: RunResult) -> str:
    """One line: the verdict by the library's promise and what shows it."""
    verdict, line = cell(label, result)
    return f"{verdict}: {line}"


def as_dict(plans_run: list[tuple[Plan, list[RunResult]]]) -> dict:
    """The scoreboard for the JSON report's `scoreboard` (the HTML report draws it): its columns in order, and per
    library its promise and each column's verdict and line of evidence."""
    columns = list(dict.fromkeys(label for plan, _ in plans_run for label, _ in plan.runs))
    rows = []
    for plan, results in plans_run:
        a = plan.adapter
        cells = {label: dict(zip(("verdict", "evidence"), cell(label, result), strict=True))
                 for (label, _), result in zip(plan.runs, results, strict=True)}
        rows.append({"library": a.name, "version": a.version(), "delivery": a.delivery, "promise": a.promise,
                     "cells": cells})
    return {"columns": columns, "rows": rows}


def table(plans_run: list[tuple[Plan, list[RunResult]]]) -> Table:
    columns = list(dict.fromkeys(label for plan, _ in plans_run for label, _ in plan.runs))
    t = Table(title="the libraries' scoreboard: each held to its own promise")
    t.add_column("library")
    for label in columns:
        t.add_column(label)
    for plan, results in plans_run:
        cells = dict(zip([label for label, _ in plan.runs], results, strict=True))
        t.add_row(f"{plan.adapter.name} {plan.adapter.version()}",
                  *[evidence(label, cells[label]) if label in cells else "-" for label in columns])
    return t


def markdown(plans_run: list[tuple[Plan, list[RunResult]]]) -> str:
    """The same table as Markdown, for docs/libraries.md."""
    t = table(plans_run)
    head = [str(c.header) for c in t.columns]
    rows = [[str(cell) for cell in column._cells] for column in t.columns]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in zip(*rows, strict=True)]
    return "\n".join(lines)
