"""`lib`: a queue library's own workers judged at each setting, each run in a database of its own
(pg_claimcheck.libs.runner), from provisioning to the judged runs. The CLI's `lib`, `bench --libs` and
`api.run(lib=...)` call it.
"""
from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

from pg_claimcheck.app.events import RunEvents
from pg_claimcheck.app.preflight import preflight_libraries
from pg_claimcheck.app.runs import Ran
from pg_claimcheck.libs._adapter import LibraryAdapter
from pg_claimcheck.libs.parity import check_cycles
from pg_claimcheck.libs.runner import run_library
from pg_claimcheck.server.provision import Server
from pg_claimcheck.settings import RunSettings
from pg_claimcheck.verdict.result import RunResult


def lib(provide: Callable[[], AbstractContextManager[Server]], adapter: LibraryAdapter, grid: list[RunSettings],
        events: RunEvents, *, pgbench: bool = False) -> Ran:
    """Run `adapter`'s workers at each setting of `grid` on the server `provide` gives; with `pgbench`,
    each run's worker cycle through pgbench too (refused before the first run if it has none)."""
    with provide() as server:
        events.server_ready(server)
        preflight_libraries(server, [adapter])
        if pgbench:
            check_cycles([adapter], server.bin_dir, grid)  # before the first run, not after it
        return Ran(server, run_libraries(server, [adapter], grid, events, pgbench=pgbench))


def run_libraries(server: Server, adapters: list[LibraryAdapter], grid: list[RunSettings],
                  events: RunEvents, pgbench: bool = False) -> list[RunResult]:
    """Every library x setting; with `pgbench`, the caller has run check_cycles before any run."""
    results = []
    for adapter in adapters:
        for settings in grid:
            label = f"{adapter.name} {adapter.version()} · {settings.workers}w" + (" · faults" if settings.faults else "")
            with events.running(label, settings, "enqueuing"):
                result = run_library(server, adapter, settings, pgbench=pgbench, progress=events.progress)
            events.run_finished(label, result)
            results.append(result)
    return results
