"""Interrupts, killed coordinators and reused run ids: nothing left behind, nothing of another run touched."""
from __future__ import annotations

import os
import signal
import time

import psycopg

from pg_claimcheck.interleave.stepper import STEP_TIMEOUT_S

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
    first = cli.start("interleave", _spec(cli, 4))  # two permutations of 4 s: still running when the second starts
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
    # Its step was sleeping for 600 s: the server notices the dead client within a second
    # (client_connection_check_interval), instead of at the sleep's end.
    deadline = time.monotonic() + 10
    while _backends(cli) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _backends(cli) == 0
    assert cli.leftovers() == [f"schema claimcheck_{cli.run_id}"]
    killed = cli.run_id
    cli.run_id = killed + "n"
    after = cli("interleave", _spec(cli, 0))
    assert after.code == 0, after.stderr
    cli.assert_nothing_left()
    # Every run sweeps a dead owner's leftovers: on a server shared with the suite's other xdist
    # workers one of their runs may sweep it first, so the proof is that it is gone, whoever swept it
    # (ours says so when it was ours).
    cli.run_id = killed
    cli.assert_nothing_left()


def test_the_next_run_says_why_it_leaves_a_dead_runs_schema_whose_connections_remain(cli):
    proc = cli.start("interleave", _spec(cli, 600))
    _wait_for_schema(cli)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    killed = cli.run_id
    # The killed run's own backends end within a second or so (client_connection_check_interval),
    # later on a loaded machine: wait for them, so that the one held below is the only one left.
    deadline = time.monotonic() + 30
    while _backends(cli) and time.monotonic() < deadline:
        time.sleep(0.1)
    # A connection of the killed run that is still open (a backend the server has not ended yet).
    with psycopg.connect(cli.server.dsn, autocommit=True, application_name=f"claimcheck/{killed}/s-A") as held:
        cli.run_id = killed + "n"
        after = cli("interleave", _spec(cli, 0))
        assert after.code == 0, after.stderr
        said = " ".join(after.stderr.split())
        assert (f"left claimcheck_{killed} alone: its owner, process {proc.pid} on this host, is gone, but 1 "
                f"connection(s) of its run are still open (pid {held.info.backend_pid} (s-A, idle))") in said, said
    cli.assert_nothing_left()
    cli.run_id = killed  # the leftover was kept, as it should be; the sweep itself is the test above
    with psycopg.connect(cli.server.dsn, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA claimcheck_{killed} CASCADE")
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


def test_interleave_counts_and_refuses_too_many_permutations_before_starting(cli):
    path = cli.scratch / "huge.spec"
    path.write_text("".join(f"session S{i}\n" + "".join(f"step s{i}_{j} {{ SELECT 1 }}\n" for j in range(6))
                            for i in range(4)))
    result = cli("interleave", str(path))
    assert result.code == 2
    text = " ".join(result.stderr.split())
    assert "2,308,743,493,056 permutation(s)" in text and "--max-permutations" in text
    assert "PostgreSQL" not in text  # refused before any server was reached
    small = cli("interleave", "seed000_naive_subquery", "--max-permutations", "1")
    assert small.code == 1, small.stderr  # one given permutation: within the cap
    cli.assert_nothing_left()


def test_a_claim_step_returning_a_text_key_is_judged_not_a_traceback(cli):
    # Keys of any type (text, uuid) are jobs like integer ids: one claim of 'job-1' is no violation.
    path = cli.scratch / "text.spec"
    path.write_text("session A\nclaim a_claim { SELECT 'job-1'::text AS id, 1 AS attempts }\n")
    result = cli("interleave", str(path))
    assert result.code == 0, result.stderr
    assert "Traceback" not in result.stderr
    cli.assert_nothing_left()


def test_a_bad_json_path_is_refused_before_the_run_and_no_directory_is_made(cli):
    target = cli.scratch / "no" / "such" / "dir" / "x.json"
    for verb in (["check", "skip-locked"], ["bench", "--strategies", "skip-locked"], ["interleave", "seed000_naive_subquery"],
                 ["vacuum"], ["explain", "skip-locked"], ["notify"], ["faults"]):
        result = cli(*verb, "--json", str(target))
        assert result.code == 2, (verb, result.stderr)
        text = " ".join(result.stderr.split())
        assert f"--json {target}: the directory" in text and "PostgreSQL" not in text, (verb, text)
    assert not (cli.scratch / "no").exists()
    cli.assert_nothing_left()


def test_vacuum_validates_the_strategy_file_like_check(cli):
    path = cli.scratch / "bad.sql"
    path.write_text("-- name: claim\nSELECT id, attempts FROM jobz LIMIT %(batch)s\n")
    result = cli("vacuum", "--strategy", str(path), "--jobs", "50")
    assert result.code == 2
    assert "section 'claim' fails on the server: relation \"jobz\" does not exist" in " ".join(result.stderr.split())
    cli.assert_nothing_left()


def test_errors_are_one_line_when_stderr_is_not_a_terminal(cli):
    result = cli("check", "skip-locked", "--dsn", "postgresql://nobody@127.0.0.1:1/" + "x" * 120)
    assert result.code == 2
    (line,) = [l for l in result.stderr.splitlines() if l.startswith("claimcheck: error")]
    assert len(line) > 200 and "Check the DSN" in line  # not hard-wrapped at 80 columns
