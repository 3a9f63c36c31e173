"""The table after a fixed-work run, printed as seed 003 prints it (pg_claimcheck.report.tableafter)."""
from pg_claimcheck.report.tableafter import psql_lines


def test_the_table_after_reads_as_psql_prints_it_in_the_seed():
    assert psql_lines([("done", 2100, 8), ("queued", 7900, 0)]) == [
        " status | count | max_attempts",
        "--------+-------+--------------",
        " done   |  2100 |            8",
        " queued |  7900 |            0",
    ]
    assert psql_lines([("done", 10000, 1)])[2] == " done   | 10000 |            1"
