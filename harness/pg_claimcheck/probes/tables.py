"""Rich tables for the vacuum probe. Functions of plain results; nothing here runs a query."""
from __future__ import annotations

from rich.table import Table
from rich.text import Text

from pg_claimcheck.probes._work import human_bytes
from pg_claimcheck.probes.soak import SoakPhase
from pg_claimcheck.probes.vacuum import HOLDERS, ArchiveResult, VacuumRow

KEPT_SHARE_WORTH_FLAGGING = 0.5  # of the row versions the workload made: a held horizon, not noise


def _age(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _kept(row: VacuumRow) -> Text:
    kept = row.held.dead_not_removable
    if row.jobs_processed and kept >= KEPT_SHARE_WORTH_FLAGGING * row.jobs_processed:
        return Text(f"{kept:,}", style="bold red")
    return Text(f"{kept:,}", style="green" if kept == 0 else "")


def vacuum_table(rows: list[VacuumRow], title: str) -> Table:
    table = Table(title=title, header_style="bold", title_justify="left")
    columns = ("holder", "jobs\nprocessed", "holder\nxmin age", "holder\nxid age", "n_dead_tup\nbefore",
               "table size\nbefore", "held: VACUUM\nremoved", "held: dead but\nnot removable",
               "held: cutoff\nage (xids)", "released:\nremoved", "released: not\nremovable")
    for name in columns:
        table.add_column(name, justify="left" if name == "holder" else "right", no_wrap=True)
    for row in rows:
        table.add_row(
            Text(row.holder, style="bold"), f"{row.jobs_processed:,}", _age(row.horizon.xmin_age),
            _age(row.horizon.xid_age), f"{row.dead_before.n_dead_tup:,}", human_bytes(row.dead_before.table_bytes),
            f"{row.held.removed:,}", _kept(row), _age(row.held.cutoff_age_xids),
            f"{row.released.removed:,}", f"{row.released.dead_not_removable:,}",
        )
    table.caption = "\n".join(f"{row.holder}: {HOLDERS[row.holder]}" for row in rows)
    table.caption_justify = "left"
    return table


def archive_table(result: ArchiveResult, title: str) -> Table:
    table = Table(title=title, header_style="bold", title_justify="left")
    for name in ("step", "n_dead_tup", "table size", "note"):
        table.add_column(name, justify="left" if name in ("step", "note") else "right")
    v = result.vacuum
    for step, stats, note in (
        ("before (jobs done, vacuumed)", result.before, ""),
        (f"after DELETE in {result.batches:,} batch(es) of ≤{result.batch:,}", result.after_delete,
         f"{result.deleted:,} rows deleted: dead, still on disk"),
        ("after VACUUM", result.after_vacuum,
         f"VACUUM removed {v.removed:,}, {v.dead_not_removable:,} not removable; the space is reusable"
         + (f" ({pruned:,} already pruned by later batches' scans)" if (pruned := result.deleted - v.removed
                                                                      - v.dead_not_removable) > 0 else "")),
    ):
        table.add_row(step, f"{stats.n_dead_tup:,}", human_bytes(stats.table_bytes), note)
    return table


def soak_table(phases: list[SoakPhase], title: str) -> Table:
    table = Table(title=title, header_style="bold", title_justify="left")
    for name in ("holder", "t (s)", "jobs done", "jobs/s\n(interval)", "n_dead_tup", "table size", "holder\nxmin age"):
        table.add_column(name, justify="left" if name == "holder" else "right")
    for phase in phases:
        for i, s in enumerate(phase.samples):
            table.add_row(phase.holder if i == 0 else "", f"{s.elapsed_s:.1f}", f"{s.jobs_done:,}",
                          f"{s.jobs_per_s:,.0f}", f"{s.stats.n_dead_tup:,}", human_bytes(s.stats.table_bytes),
                          _age(s.holder_xmin_age))
        v = phase.vacuum
        table.add_row("", "end", Text(f"{phase.jobs_per_s:,.0f} jobs/s overall", style="bold"), "",
                      Text(f"VACUUM: {v.removed:,} removed, {v.dead_not_removable:,} not removable",
                           style="bold red" if v.dead_not_removable else "green"), "", "", end_section=True)
    return table
