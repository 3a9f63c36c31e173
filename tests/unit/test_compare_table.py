"""compare's table in an 80-column terminal (every column with --wide): golden text."""
from io import StringIO

from rich.console import Console

from pg_claimcheck.report.compare import compare, comparison_table
from sample_reports import report, run_object

TITLE = "claimcheck compare: base.json → new.json"
BASE = report(run_object("naive-subquery", 8, 4000.0, rates=[4000, 4100, 3900, 4050, 3950]),
              run_object("skip-locked", 16, 3900.0, condition="as-seeded"),
              run_object("skip-locked", 4, 800.0, condition="stale-stats"),
              run_object("my-very-long-strategy-file-name", 8, 1000.0))
NEW = report(run_object("naive-subquery", 8, 2000.0, ok=False, rates=[2000, 2100, 1900, 2050, 1950]),
             run_object("skip-locked", 16, 3000.0, condition="as-seeded"),
             run_object("skip-locked", 4, 800.0, ok=False, condition="stale-stats"),
             run_object("for-update", 8, 1000.0))


def rendered(width: int, wide: bool) -> str:
    out = StringIO()
    Console(file=out, width=width, color_system=None).print(comparison_table(compare(BASE, NEW), TITLE, wide=wide))
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines())


def test_the_table_fits_80_columns_without_cutting_a_word():
    assert rendered(80, wide=False) == """\
claimcheck compare: base.json → new.json
                      jobs/s               double verdict
run               base → new change     p claimed base → new      status
────────────────────────────────────────────────────────────────────────────────
naive-subquery 4,000 → 2,000 -50.0% 0.004   0 → 5 held → VIOLATED VERDICT
lease 8w b10                                                      REGRESSED
skip-locked    3,900 → 3,000 -23.1%     -   0 → 0 held → held     SLOWER
lease 16w b10
skip-locked        800 → 800  +0.0%     -   0 → 5 held → VIOLATED VERDICT
lease 4w b10                                                      REGRESSED
under
stale-stats
for-update         - → 1,000      -     -   - → 0 - → held        new
lease 8w b10
my-very-long-s     1,000 → -      -     -   0 → - held → -        gone
trategy-file-n
ame lease 8w
b10
--wide: every column (the key's parts apart, the spread over repetitions)"""


def test_wide_shows_every_column():
    text = rendered(400, wide=True)
    for heading in ("strategy", "mode", "workers", "batch", "condition", "base jobs/s", "new jobs/s", "change",
                    "base verdict", "new verdict", "status"):
        assert heading in text
    assert "4,000 ±50 (n=5)" in text and "…" not in text


def test_the_compact_table_says_no_progress_as_the_wide_one_does():
    stuck = run_object("skip-locked", 8, 10.0, ok=True, exactly_once=False, outcome="no-progress")
    comparison = compare(report(run_object("skip-locked", 8, 1000.0)), report(stuck))
    for wide in (False, True):
        out = StringIO()
        Console(file=out, width=400, color_system=None).print(comparison_table(comparison, TITLE, wide=wide))
        assert "NO PROGRESS" in out.getvalue() and "VIOLATED" not in out.getvalue().replace("VERDICT", "")
