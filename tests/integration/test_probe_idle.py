"""`claimcheck idle`'s designs on the test server, one per wait mode, with intervals that make the answer
certain by construction: a poll of 200 ms in a 3 s window is never quiet for 600 s; a LISTEN or a drain with a
60 s interval is not seen again in a 2 s window, and 60 s is over a 30 s threshold."""
import time

import pytest

from pg_claimcheck.contract.strategy import load_strategy
from pg_claimcheck.engine.driver import seed
from pg_claimcheck.probes.idle import Design, run_design
from pg_claimcheck.server.session import run_schema


@pytest.fixture
def empty_queue(server):
    with run_schema(server) as (conn, run):
        strategy = load_strategy("skip-locked")
        seed(conn, run, strategy, 0)
        yield conn, run, strategy


def own_sessions(conn, run, wait_s: float = 10.0) -> int:
    """The run's sessions besides the coordinator, once closed ones have left (a backend exits after its client)."""
    deadline = time.monotonic() + wait_s
    while True:
        left = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE %s AND "
                            "application_name <> %s", (run.app_pattern(), run.app_name("coordinator"))).fetchone()[0]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def test_polling_keeps_the_compute_on(empty_queue):
    conn, run, strategy = empty_queue
    fp = run_design(run, strategy, Design("poll", 200), 3.0, [600])
    (v,) = fp.verdicts
    assert v.would_suspend is False and v.wakes_per_hour == 0 and v.basis in ("period seen", "activity recurs")
    assert fp.causes()["claim poll"] >= 2 and fp.quiet.longest_s < 600
    assert fp.resume is None  # it never suspends: nothing to simulate
    assert own_sessions(conn, run) == 0


def test_listen_with_a_long_fallback_suspends_and_a_notified_job_survives_the_reconnect(empty_queue):
    conn, run, strategy = empty_queue
    fp = run_design(run, strategy, Design("notify", 60_000), 2.0, [30])
    (v,) = fp.verdicts
    assert v.would_suspend is True and v.basis == "interval"
    assert not any(a.cause == "LISTEN fallback poll" for a in fp.activity if a.at >= fp.start)
    r = fp.resume
    assert r is not None and r.reconnected_after_s is not None  # it reconnects at once: that resumes the compute
    assert r.job_claimed_after_s is not None and r.found_by in ("listen", "notified")  # not lost
    assert "reconnects" in v.reason
    assert own_sessions(conn, run) == 0


def test_a_scheduled_drain_holds_nothing_between_runs(empty_queue):
    conn, run, strategy = empty_queue
    fp = run_design(run, strategy, Design("drain", 60_000), 2.0, [30])
    (v,) = fp.verdicts
    assert v.would_suspend is True and v.wakes_per_hour == pytest.approx(60.0)  # 3600 / its 60 s schedule
    assert fp.resume is None and fp.notes  # no session to close: said so
    assert own_sessions(conn, run) == 0
