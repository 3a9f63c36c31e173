"""A claim of a huge batch is stopped at its proof (docs/contracts.md, section 2): the run ends as soon
as the over-claim committed, not after recording and completing every row it returned; of its rows,
only those it asked for are recorded and judged (its count proves it)."""
import json

HUGE = 200_000
TAKES_EVERYTHING = """-- lifecycle: shared
-- name: claim
UPDATE jobs SET status = 'running', attempts = attempts + 1
WHERE status = 'queued' AND %(batch)s > 0
RETURNING id, attempts;
"""


def test_a_claim_returning_200000_rows_ends_the_run_at_its_over_claim(cli):
    path = cli.scratch / "takes_everything.sql"
    path.write_text(TAKES_EVERYTHING)
    report = cli.scratch / "over.json"
    result = cli("check", str(path), "--plans", "none", "--workers", "2", "--jobs", str(HUGE), "--json", str(report))
    assert result.code == 1, result.stderr
    out = " ".join(result.stdout.split())
    assert "stopped early:" in out and "more than it asked for (an over-claim)" in out, out[-2000:]
    assert "claims recorded until the workers stopped (of an over-claim, the rows it asked for" in out
    assert "exactly-once violated" in out
    run = json.loads(report.read_text())["runs"][0]
    # Each worker's over-claim recorded the 10 rows it asked for (--batch), however many it returned.
    assert 10 <= run["claims"] <= 2 * 10 and run["over_claims"] >= 1, run["claims"]
    assert max(e["rows"] for e in run["shape_violations"] if e["kind"] == "over-claim") > 10
    assert "Traceback" not in result.stderr
    cli.assert_nothing_left()
