"""`claimcheck lib --pgbench`: a cycle that cannot be built is refused before any run. The pgbench pass
itself runs in each library's healthy run (tests/integration/test_libs.py, test_node_libs.py)."""
import psycopg
import pytest

from pg_claimcheck.errors import UsageError
from pg_claimcheck.libs import load_adapter
from pg_claimcheck.libs.parity import check_cycles
from pg_claimcheck.libs.runner import lib_settings


def test_a_cycle_that_cannot_be_built_is_refused_before_anything_starts(server, monkeypatch):
    import pg_claimcheck.libs.saq as saq_adapter

    monkeypatch.setattr(saq_adapter, "SQL_COPIED_FROM", "0.0.1")
    with pytest.raises(UsageError, match="without --pgbench"):
        check_cycles([load_adapter("saq")], server.bin_dir, [lib_settings(workers=1, jobs=10)])


def test_the_cli_exits_2_in_one_paragraph_and_creates_no_database(server, monkeypatch, capsys):
    """`claimcheck lib saq --pgbench` with a saq whose SQL we have not read: refused before any run."""
    import pg_claimcheck.libs.saq as saq_adapter
    from pg_claimcheck.cli import main

    monkeypatch.setattr(saq_adapter, "SQL_COPIED_FROM", "0.0.1")
    monkeypatch.setenv("CLAIMCHECK_DSN", server.dsn)
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        before = conn.execute("SELECT count(*) FROM pg_database WHERE datname LIKE 'claimcheck\\_%'").fetchone()[0]
        assert main(["lib", "saq", "--workers", "1", "--jobs", "10", "--pgbench"]) == 2
        after = conn.execute("SELECT count(*) FROM pg_database WHERE datname LIKE 'claimcheck\\_%'").fetchone()[0]
    err = capsys.readouterr().err
    assert "saq==0.0.1" in " ".join(err.split()) and "Traceback" not in err
    assert after == before
