"""The jobs table after a fixed-work run, as seed 003 prints it (`status | count | max_attempts`).

The seed's headline is a fixed amount of work, not a drain: `pgbench -c 8 -t 1250` of the naive
statement on 10,000 jobs, then one GROUP BY over the table. `--claims-per-worker N` (pgbench's `-t`)
makes our workers do the same work; with `bench --pgbench` pgbench does it too, and both tables are
printed the way psql prints them, so a reader checks the seed's figures in one command.
"""
from __future__ import annotations

from rich.console import Console

from pg_claimcheck.verdict.result import RunResult

HEADINGS = ("status", "count", "max_attempts")


def psql_lines(rows) -> list[str]:
    """psql's aligned format: text left, numbers right, a `-+-` rule under the headings."""
    cells = [(str(status), str(count), str(most)) for status, count, most in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h) for i, h in enumerate(HEADINGS)]
    head = " " + " | ".join(h.center(w) for h, w in zip(HEADINGS, widths))
    rule = "-" + "-+-".join("-" * w for w in widths) + "-"
    body = [" " + " | ".join([c[0].ljust(widths[0]), c[1].rjust(widths[1]), c[2].rjust(widths[2])]) for c in cells]
    return [head, rule, *body]


def print_tables_after(console: Console, run: RunResult) -> None:
    """A `--claims-per-worker` run's table after it, ours and pgbench's, when our jobs table was used."""
    s = run.settings
    if s.claims_per_worker is None or not run.table.by_status:
        return
    blocks = [(f"{run.strategy.name} ({s.mode}), {s.workers} workers x {s.claims_per_worker:,} claims on {s.jobs:,} "
               f"jobs, the table after ({run.verdict.claims:,} claims committed, {run.jobs_done:,} jobs done):",
               run.table.by_status)]
    if run.pgbench is not None and run.pgbench.by_status:
        blocks.append((f"the same through pgbench (-c {run.pgbench.clients} -t {run.pgbench.scripts_per_client}), "
                       "the table after:", run.pgbench.by_status))
    for title, rows in blocks:
        console.print(title, highlight=False, markup=False)
        for line in psql_lines(rows):
            console.print(line, highlight=False, markup=False)
