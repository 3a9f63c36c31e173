"""A strategy file is run on the server, rolled back, before any worker starts."""
from pathlib import Path

import pytest

from pg_claimcheck.contract.strategy import load_strategy, validate_on_server
from pg_claimcheck.errors import SqlFileError
from pg_claimcheck.server.schema import build_jobs_table
from pg_claimcheck.server.session import run_schema


@pytest.fixture
def validate(server, tmp_path):
    def check(text: str):
        path = tmp_path / "claim.sql"
        path.write_text(text)
        with run_schema(server) as (conn, run):
            build_jobs_table(conn, run.schema, 10)
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
    assert "claim.sql:2: section 'claim'" in str(info.value)


@pytest.mark.parametrize("text,placed", [
    # The failing statement is the second of its section, its error on the third line of it, after
    # placeholders that the server counts as `$n`.
    ("-- expected: safe\n\n-- name: claim\n\nSELECT %(batch)s::int;\nUPDATE jobs\nSET status = 'running'\n"
     "WHERE id = %(batch)s RETURNING id, nosuch;\n", "claim.sql:8: section 'claim'"),
    ("-- lifecycle: shared\n-- name: claim\nUPDATE jobs SET status = 'running' WHERE id < 0 RETURNING id, attempts;\n"
     "-- name: complete\nUPDATE jobs SET status = 'done' WHERE id = %(id)s\n  AND nosuch = %(attempts)s;",
     "claim.sql:6: section 'complete'"),
])
def test_a_server_error_is_placed_at_its_line(validate, text, placed):
    # The contract promises file, section and line; the line was missing.
    with pytest.raises(SqlFileError, match="does not exist") as info:
        validate(text)
    assert f"/{placed} fails on the server" in str(info.value), str(info.value)


def test_the_servers_hint_reads_cleanly(validate):
    # The hint's own period was doubled ("casts..").
    with pytest.raises(SqlFileError, match=r"Hint: No function matches .* casts\. Nothing was run") as info:
        validate("-- name: claim\nUPDATE jobs SET status = 'running' RETURNING id, lower(42);\n")
    assert ".." not in str(info.value)


def test_a_claim_that_does_not_end_in_the_validation_is_said_not_to_end(validate, monkeypatch):
    # A 200,000-row claim under load ran into the validation's timeout and read "fails on the server:
    # canceling statement due to statement timeout", as if the statement were wrong. (The timeout
    # shortened here, so that a claim of a second is one that does not end in it.)
    from pg_claimcheck.contract import strategy

    monkeypatch.setattr(strategy, "VALIDATION_TIMEOUT_MS", 200)
    with pytest.raises(SqlFileError) as info:
        validate("-- name: claim\nUPDATE jobs SET status = 'running' WHERE pg_sleep(1) IS NOT NULL RETURNING id;\n")
    message = str(info.value)
    assert "claim.sql:2: section 'claim'" in message and "where it had 0.2 s" in message, message
    assert "once in the validation (rolled back)" in message and "It did not finish" in message, message
