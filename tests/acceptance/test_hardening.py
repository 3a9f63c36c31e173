"""Interrupts, killed coordinators and reused run ids: nothing left behind, nothing of another run touched."""
from __future__ import annotations

import os
import signal
import time

import psycopg

from claimcheck.interleave.runner import STEP_TIMEOUT_S

SLEEPY_SPEC = "jobs 3\nsession A\nstep a_sleep {{ SELECT pg_sleep({seconds}) }}\nsession B\nstep b_one {{ SELECT 1 }}\n"


def _spec(cli, seconds: float):
    path = cli.scratch / "sleepy.spec"
    path.write_text(SLEEPY_SPEC.format(seconds=seconds))
    return str(path)


def _wait_for_schema(cli, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    with psycopg.connect(cli.server.dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            if conn.execute("SELECT 1 FROM pg_stat_activity WHERE application_name LIKE %s AND state = 'active'",
                            (f"claimcheck/{cli.run_id}/s-%",)).fetchone():
                return
            time.sleep(0.05)
    raise AssertionError("the run never started its steps")


def _backends(cli) -> int:
    with psycopg.connect(cli.server.dsn, autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE %s",
                            (f"claimcheck/{cli.run_id}/%",)).fetchone()[0]


def test_ctrl_c_during_interleave_cancels_the_running_step_at_once(cli):
    proc = cli.start("interleave", _spec(cli, 600))
    _wait_for_schema(cli)
    os.killpg(proc.pid, signal.SIGINT)
    sent = time.monotonic()
    out, err = proc.communicate(timeout=60)
    took = time.monotonic() - sent
    assert proc.returncode == 2, err
    assert took < STEP_TIMEOUT_S / 2, took  # not the step's 600 s, nor the step timeout
    assert f"schema claimcheck_{cli.run_id} dropped" in err
    assert _backends(cli) == 0
    cli.assert_nothing_left()


def test_double_ctrl_c_during_interleave_still_cleans_up_and_says_so(cli):
    proc = cli.start("interleave", _spec(cli, 600))
    _wait_for_schema(cli)
    os.killpg(proc.pid, signal.SIGINT)
    time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    assert "Traceback" not in err
    assert f"schema claimcheck_{cli.run_id} dropped" in err
    assert _backends(cli) == 0
    cli.assert_nothing_left()


def test_a_reused_run_id_is_refused_and_the_live_run_is_untouched(cli):
    first = cli.start("interleave", _spec(cli, 2))
    _wait_for_schema(cli)
    second = cli("interleave", _spec(cli, 0))
    assert second.code == 2
    assert f"claimcheck_{cli.run_id} already exists" in " ".join(second.stderr.split())
    out, err = first.communicate(timeout=60)
    assert first.returncode == 0, err  # its schema was not dropped under it
    cli.assert_nothing_left()


def test_the_next_run_sweeps_what_a_killed_coordinator_left(cli):
    proc = cli.start("interleave", _spec(cli, 600))
    _wait_for_schema(cli)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    with psycopg.connect(cli.server.dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE %s",
                     (f"claimcheck/{cli.run_id}/%",))  # what the server does once it notices the dead client
    assert cli.leftovers() == [f"schema claimcheck_{cli.run_id}"]
    killed = cli.run_id
    cli.run_id = killed + "n"
    after = cli("interleave", _spec(cli, 0))
    assert after.code == 0, after.stderr
    assert f"swept schema claimcheck_{killed}" in after.stderr
    cli.assert_nothing_left()
    cli.run_id = killed
    cli.assert_nothing_left()


def test_the_next_run_sweeps_a_killed_runs_embedded_cluster(cli):
    proc = cli.start("check", "skip-locked", "--workers", "2", "--jobs", "100000", "--work-ms", "5",
                     "--pg", "embedded", dsn=False)
    deadline = time.monotonic() + 60
    while not list(cli.scratch.glob("claimcheck-pg-*/data/postmaster.pid")) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    (left,) = cli.scratch.glob("claimcheck-pg-*")
    deadline = time.monotonic() + 30  # the server shuts itself down when its parent dies
    while (left / "data" / "postmaster.pid").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    after = cli("check", "skip-locked", "--workers", "2", "--jobs", "100", "--pg", "embedded", dsn=False)
    assert after.code == 0, after.stderr
    assert f"swept {left}" in " ".join(after.stderr.split())
    cli.assert_nothing_left()
