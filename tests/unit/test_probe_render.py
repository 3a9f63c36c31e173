"""The probes' tables and verdicts, from hand-built results, rendered at a fixed width."""
from io import StringIO

from rich.console import Console

from pg_claimcheck.commands.notify import wakeup_table
from pg_claimcheck.probes._verbose import VacuumFigures
from pg_claimcheck.probes._work import TableStats, human_bytes
from pg_claimcheck.probes.notify import Delivery, Folding
from pg_claimcheck.probes.tables import archive_table, vacuum_table
from pg_claimcheck.probes.vacuum import ArchiveResult, Horizon, Outside, VacuumRow
from pg_claimcheck.probes.wakeup import Variant, WakeResult


def render(renderable) -> str:
    console = Console(file=StringIO(), width=200, color_system=None)
    console.print(renderable)
    return console.file.getvalue()


def row(holder: str, kept: int, removed_after: int) -> VacuumRow:
    stats = TableStats(n_dead_tup=2000, n_live_tup=2010, table_bytes=300 * 1024)
    return VacuumRow(holder, 2000, Horizon(None, 401 if kept else None, "idle in transaction"),
                     Outside(0, None, 0, 0), stats, VacuumFigures(0, 4010, kept, 401 if kept else 0),
                     VacuumFigures(removed_after, 2010, 0, 0), TableStats(0, 2010, 300 * 1024), Outside(0, None, 0, 0))


def test_vacuum_table_shows_the_seeds_figures():
    text = render(vacuum_table([row("none", 0, 0), row("claim", 2000, 2001)], "t"))
    claim_line = next(line for line in text.splitlines() if line.startswith("│ claim"))
    assert "2,000" in claim_line and "2,001" in claim_line and "401" in claim_line
    assert "claim: a claim idle in transaction after its write" in text


def test_archive_table_has_three_steps():
    stats = TableStats(0, 2100, 320 * 1024)
    result = ArchiveResult(1000, 2, 2000, stats, TableStats(2000, 100, 320 * 1024), TableStats(0, 100, 264 * 1024),
                           VacuumFigures(2000, 100, 0, 0))
    text = render(archive_table(result, "archive"))
    assert "after DELETE in 2 batch(es) of ≤1,000" in text and "VACUUM removed 2,000" in text
    assert "264.0 kB" in text


def test_wakeup_table_flags_unclaimed_jobs():
    result = WakeResult(Variant("listen", 1000), enqueued=3, latencies_ms=[1.0, 2.0])
    text = render(wakeup_table([result], "w"))
    assert "LISTEN + fallback poll 1000 ms" in text and "2/3" in text


def test_folding_verdicts():
    assert Folding("same", ["a", "a", "a"], ["a"], one_transaction=True).holds
    assert not Folding("same", ["a", "a", "a"], ["a", "a", "a"], one_transaction=True).holds
    assert Folding("each", ["a", "a"], ["a", "a"], one_transaction=False).holds
    assert Folding("distinct", ["a", "b"], ["a", "b"], one_transaction=True).holds


def test_delivery_holds_only_when_nothing_came_early():
    assert Delivery(seen_before_commit=0, after_commit_ms=0.1).holds
    assert not Delivery(seen_before_commit=1, after_commit_ms=0.1).holds
    assert not Delivery(seen_before_commit=0, after_commit_ms=None).holds


def test_human_bytes():
    assert human_bytes(512) == "512 B" and human_bytes(320 * 1024) == "320.0 kB"
    assert human_bytes(5 * 1024 ** 2) == "5.0 MB"
