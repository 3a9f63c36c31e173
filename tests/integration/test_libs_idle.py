"""`claimcheck lib NAME --idle`: a library's own worker on its empty queue, sampled; its database goes after."""
import psycopg
import pytest

from pg_claimcheck.libs import load_adapter
from pg_claimcheck.libs.idle_probe import run_library_idle
from pg_claimcheck.server.schema import SCHEMA_PREFIX

pytest.importorskip("procrastinate", reason="claimcheck[procrastinate] is not installed")


def test_procrastinate_at_its_defaults_listens_and_leaves_nothing(server, monkeypatch):
    monkeypatch.setenv("CLAIMCHECK_RUN_ID", "idlelib01")
    fp = run_library_idle(server, load_adapter("procrastinate"), 2.0, [600])
    # procrastinate LISTENs on a connection of its own at start-up (listen_notify=True by default), and
    # that connection's last query stays the LISTEN: the sampler reads it whatever the machine's speed.
    assert "LISTEN" in fp.causes() and fp.causes()["connect"] >= 1
    assert fp.verdicts[0].basis in ("period seen", "activity recurs", "no activity", "not seen", "quiet seen")
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        left = conn.execute("SELECT count(*) FROM pg_database WHERE datname = %s",
                            (f"{SCHEMA_PREFIX}idlelib01",)).fetchone()[0]
    assert left == 0
