"""A library's own SQL through pgbench: what its worker's Python costs over its statements.

`claimcheck lib NAME --pgbench` (and `bench --libs ... --pgbench`) runs, after the library's own
workers drained the queue, one more pass in the run's own database: the library's tables are
emptied (`<name>_reset` of sql/libs.sql), the same N jobs are enqueued through the library's own
API, and pgbench runs one cycle of the library's worker loop (:meth:`LibraryAdapter.pgbench_cycle`:
the library's own statements, its batch, its transactions) with as many clients as workers. pgbench
cannot stop on an empty queue, so each client runs ceil(jobs / (clients x jobs per cycle)) cycles;
jobs/s is the jobs the library's own table shows finished afterwards over pgbench's own time,
as for a SQL strategy (:mod:`pg_claimcheck.engine.pgbench`, whose :func:`~pg_claimcheck.engine.pgbench.run_script`
starts pgbench for both). `pgbench_ratio` = the library's jobs/s over pgbench's.
"""
from __future__ import annotations

import math
from pathlib import Path

from pg_claimcheck.engine.pgbench import PgbenchResult, pgbench_path, pgbench_result, run_script, work_us
from pg_claimcheck.libs._adapter import LibraryAdapter, LibraryCycle
from pg_claimcheck.server.runcontext import RunContext
from pg_claimcheck.settings import RunSettings


def check_cycles(adapters: list[LibraryAdapter], bin_dir: Path | None, grid: list[RunSettings]) -> None:
    """Refuse `--pgbench` before anything starts: no pgbench here, or a library whose script cannot be built."""
    pgbench_path(bin_dir)
    for adapter in adapters:
        for settings in grid:
            adapter.pgbench_cycle(work_us(settings))


def run_cycle(adapter: LibraryAdapter, run: RunContext, bin_dir: Path | None, settings: RunSettings) -> PgbenchResult:
    """The pgbench pass of one library x setting, in the run's own database (`run`)."""
    cycle = adapter.pgbench_cycle(work_us(settings))
    clients = settings.workers
    with run.connect("coordinator", in_schema=False) as conn:
        adapter.reset(conn)
        adapter.enqueue(run.role_dsn("coordinator"), range(1, settings.jobs + 1))
        variables = _per_client(conn, cycle, clients)
        per_client = max(1, math.ceil(settings.jobs / (clients * cycle.jobs)))
        counts = run_script(run, bin_dir, adapter.name, cycle.script, clients, per_client, variables=variables)
        done = adapter.outcome(conn).done
    return pgbench_result(counts, clients, per_client, done, cycle.script, cycle.statements)


def _per_client(conn, cycle: LibraryCycle, clients: int) -> dict[str, str]:
    """Each per-client statement run once per client; its first columns as an array literal."""
    found = {}
    for name, statement in cycle.per_client.items():
        values = [str(conn.execute(statement).fetchone()[0]) for _ in range(clients)]
        found[name] = "{" + ",".join(values) + "}"
    return found
