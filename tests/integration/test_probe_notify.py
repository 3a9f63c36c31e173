"""LISTEN/NOTIFY on the test server: the three documented properties and the wake-up comparison."""
import psycopg

from pg_claimcheck.contract.strategy import load_strategy
from pg_claimcheck.probes.notify import channel_name, notify_facts
from pg_claimcheck.probes.wakeup import Variant, run_wakeup
from pg_claimcheck.server.session import run_schema


def test_delivery_folding_and_payload_limit(server):
    with run_schema(server) as (conn, run):
        facts = notify_facts(conn, run)
        # The trigger and its function live in the run's schema, nowhere else.
        functions = conn.execute("SELECT n.nspname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                                 "WHERE p.proname = 'jobs_notify'").fetchall()
        assert (run.schema,) in functions
    d = facts.delivery
    assert d.seen_before_commit == 0 and d.after_commit_ms is not None
    listener_checks = [e for e in d.events if e.who == "listener"]
    assert [e.seen for e in listener_checks][-1] == 1 and all(e.seen == 0 for e in listener_checks[:-1])
    same, distinct, separate = facts.folding
    assert same.received == ["default"]
    assert distinct.received == ["queue-1", "queue-2", "queue-3"]
    assert separate.received == ["default"] * 3
    assert facts.payload.accepted_bytes == 7999
    assert facts.payload.sqlstate == "22023" and "payload string too long" in facts.payload.message
    assert facts.holds


def test_listen_worker_is_woken_by_notifications_and_pollers_by_their_clock(server):
    with run_schema(server) as (conn, run):
        listen, poll = run_wakeup(conn, run, load_strategy("skip-locked"),
                                  [Variant("listen", 2_000), Variant("poll", 100)], enqueues=8)
    assert listen.claimed == listen.enqueued == 8 and poll.claimed == poll.enqueued == 8
    assert listen.woken_by["notify"] >= 1 and listen.woken_by["poll"] == 0
    assert poll.woken_by["poll"] == 8 and poll.woken_by["notify"] == 0
    assert all(ms >= 0 for ms in listen.latencies_ms + poll.latencies_ms)


def test_channel_is_unique_to_the_run():
    assert channel_name("abc") != channel_name("abd")
    assert len(channel_name("a" * 24)) < 64  # NAMEDATALEN


def test_connections_are_closed_after_the_probe(server):
    with run_schema(server) as (conn, run):
        run_id = run.run_id
        notify_facts(conn, run)
        left = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE %s "
                            "AND pid <> pg_backend_pid()", (f"claimcheck/{run_id}/%",)).fetchone()[0]
    assert left == 0 or _gone_soon(server.dsn, run_id)


def _gone_soon(dsn: str, run_id: str) -> bool:
    """A closed connection's backend exits asynchronously; give it a moment."""
    import time
    with psycopg.connect(dsn, autocommit=True) as conn:
        for _ in range(50):
            n = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE %s",
                             (f"claimcheck/{run_id}/%",)).fetchone()[0]
            if n == 0:
                return True
            time.sleep(0.1)
    return False
