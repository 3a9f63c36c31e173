"""A strategy file is run on the server, rolled back, before any worker starts."""
from pathlib import Path

import pytest

from claimcheck.errors import SqlFileError
from claimcheck.server.session import run_schema
from claimcheck.server.schema import build_jobs_table
from claimcheck.contract.strategy import load_strategy, validate_on_server


@pytest.fixture
def validate(server, tmp_path):
    def check(text: str):
        path = tmp_path / "claim.sql"
        path.write_text(text)
        with run_schema(server) as (conn, schema, _):
            build_jobs_table(conn, schema, 10)
            validate_on_server(conn, load_strategy(str(path)))
            # Validation left no trace: every job still queued, never attempted.
            assert conn.execute("SELECT count(*) FROM jobs WHERE status = 'queued' AND attempts = 0").fetchone()[0] == 10
    return check


def test_valid_file_passes_and_changes_nothing(validate):
    validate(Path("scenarios/skip_locked.sql").read_text())


@pytest.mark.parametrize("body,message", [
    ("UPDATE jobs SET statuz = 'running' RETURNING id", r'column "statuz" of relation "jobs" does not exist'),
    ("UPDATE jobs SET status = 'running' RETURNING payload", "returns dict in its first column"),
    ("UPDATE jobs SET status = 'running' WHERE id = 1", "returns no rows"),
    ("SELECT 1; UPDATE jobs SET status = 'running' WHERE id = 1", "returns no rows"),
    ("UPDATE jobs SET status = 'nope' RETURNING id", "violates check constraint"),
])
def test_server_errors_name_the_file_and_section(validate, body, message):
    with pytest.raises(SqlFileError, match=message) as info:
        validate(f"-- name: claim\n{body}\n")
    assert "claim.sql: section 'claim'" in str(info.value)
