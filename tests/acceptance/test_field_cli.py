"""Users' own queues through the CLI: runs side by side on one server, SQLSTATEs in the report."""
from __future__ import annotations

import json
from pathlib import Path

FIELD = Path(__file__).parents[1] / "field"
TIMEOUT_S = 180


def test_session_advisory_lock_designs_run_side_by_side_on_one_server(cli, server):
    """Two runs of a que-style design at once: advisory locks are database-wide, so each run's
    keys come from a range of its own (and validation keeps no lock); both must hold."""
    other = type(cli)(server, cli.scratch)  # a second run id, same scratch directory
    que = str(FIELD / "que_0_14_session_advisory.sql")
    procs = [c.start("check", que, "--workers", "3", "--jobs", "300") for c in (cli, other)]
    outs = [p.communicate(timeout=TIMEOUT_S) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    cli.assert_nothing_left()
    other.assert_nothing_left()


def test_server_errors_inside_claims_are_counted_by_sqlstate(cli, tmp_path):
    claim = tmp_path / "nowait.sql"
    claim.write_text(
        "-- name: schema\nCREATE TABLE q (id bigint PRIMARY KEY, locked_at timestamptz);\n"
        "-- name: seed\nINSERT INTO q SELECT g FROM generate_series(1, %(jobs)s) g RETURNING id;\n"
        "-- name: remaining\nSELECT count(*) FROM q;\n"
        "-- name: claim\nUPDATE q SET locked_at = now() WHERE id = (SELECT id FROM q WHERE locked_at IS NULL "
        "ORDER BY id LIMIT 1 FOR UPDATE NOWAIT) RETURNING id;\n"
        "-- name: complete\nDELETE FROM q WHERE id = %(id)s;\n")
    report = tmp_path / "r.json"
    done = cli("check", str(claim), "--workers", "4", "--jobs", "300", "--batch", "1", "--json", str(report))
    assert done.code == 0, done.stderr
    assert "55P03 ×" in done.stdout and "reconnects after a lost connection: 0" in done.stdout
    (run,) = [r for r in json.loads(report.read_text())["runs"] if r["condition"] == "as-seeded"]
    assert run["claim_errors"]["55P03"] > 0 and run["reconnects"] == 0
    cli.assert_nothing_left()
