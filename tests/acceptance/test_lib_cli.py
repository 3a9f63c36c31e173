"""`claimcheck lib` and `bench --libs` as users run them: exit codes, reports, nothing left behind."""
import json
import os
import signal
import time

import psutil
import psycopg
import pytest

from pg_claimcheck.libs.feed import JOIN_TIMEOUT_S

LIB_SMALL = ("--workers", "2", "--jobs", "60")


def our_database(cli) -> list:
    with psycopg.connect(cli.server.dsn, autocommit=True) as conn:
        return conn.execute("SELECT datname FROM pg_database WHERE datname = %s",
                            (f"claimcheck_{cli.run_id}",)).fetchall()


def test_an_unknown_library_exits_2_naming_the_known_ones(cli):
    result = cli("lib", "nosuch")
    assert result.code == 2
    assert "procrastinate" in " ".join(result.stderr.split())


def test_lib_runs_the_librarys_own_workers_and_writes_json(cli):
    result = cli("lib", "procrastinate", *LIB_SMALL, "--json", "out.json")
    assert result.code == 0, result.stderr
    assert "the library kept its promise" in result.stdout
    doc = json.loads((cli.scratch / "out.json").read_text())
    run = doc["runs"][0]
    assert run["strategy"] == "procrastinate" and run["library"]["version"]
    assert run["exactly_once"] and run["jobs_done"] == 60 and run["claims"] == 60
    cli.assert_nothing_left()
    assert our_database(cli) == []


def test_bench_puts_libraries_side_by_side(cli):
    # What is shown is four runs side by side, not their rates: 40 jobs a run, not 150 (one pgqueuer worker did 35
    # jobs/s and one procrastinate worker 52 at load 9 here: 150 cost them 3-4 s a run)
    result = cli("bench", "--libs", "procrastinate,pgqueuer", "--workers", "1,2", "--jobs", "40")
    assert result.code == 0, result.stderr
    doc = json.loads(next((cli.scratch / "reports").glob("bench-*.json")).read_text())
    assert sorted((r["strategy"], r["workers"]) for r in doc["runs"]) == [
        ("pgqueuer", 1), ("pgqueuer", 2), ("procrastinate", 1), ("procrastinate", 2)]
    assert next((cli.scratch / "reports").glob("bench-*.html")).exists()
    cli.assert_nothing_left()


def test_ctrl_c_stops_the_library_workers_and_drops_the_database(cli):
    proc = cli.start("lib", "pgqueuer", "--workers", "2", "--jobs", "50000", "--work-ms", "5")
    deadline = time.monotonic() + 90
    while len(psutil.Process(proc.pid).children(recursive=True)) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.5)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    cli.assert_nothing_left(grace_s=15)
    assert our_database(cli) == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_fed_run_stops_its_producer_and_workers_at_once(cli, sig):
    """`lib --rate`: the producer, told to stop, is reaped within pg_claimcheck.libs.feed.CLOSE_GRACE_S, not
    waited for until its duration ends; exit 2 and nothing left. (The bound is the join the coordinator
    used to make before it stopped the workers, JOIN_TIMEOUT_S: a run stopped within it no longer waits.)"""
    proc = cli.start("lib", "saq", "--workers", "2", "--jobs", "200", "--rate", "50", "--duration", "120")
    deadline = time.monotonic() + 90
    seen = 0
    while seen < 3 and time.monotonic() < deadline:
        time.sleep(0.1)  # two workers and the producer, which starts once the workers took a job
        seen = len(psutil.Process(proc.pid).children(recursive=True))
    assert seen >= 3
    time.sleep(1.0)
    asked = time.monotonic()
    os.killpg(proc.pid, sig)
    out, err = proc.communicate(timeout=60)
    took = time.monotonic() - asked
    assert proc.returncode == 2, err
    assert took < JOIN_TIMEOUT_S, took
    cli.assert_nothing_left(grace_s=15)
    assert our_database(cli) == []


def test_a_killed_coordinators_workers_leave_and_a_later_run_of_any_verb_sweeps_its_database(cli):
    # SIGKILL: the coordinator cannot stop its workers; the kernel tells them (pg_claimcheck.server.children.die_with_parent).
    proc = cli.start("lib", "pgqueuer", "--workers", "2", "--jobs", "50000", "--work-ms", "5")
    deadline = time.monotonic() + 90
    while len(workers := [p for p in psutil.Process(proc.pid).children(recursive=True)
                          if "pg_claimcheck.libs._worker" in " ".join(p.cmdline())]) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(workers) == 2
    time.sleep(1.0)
    proc.kill()
    proc.communicate(timeout=30)
    gone, alive = psutil.wait_procs(workers, timeout=20)  # the library's graceful stop, at most STOP_GRACE_S
    assert alive == [], [p.cmdline()[:3] for p in alive]
    # Nobody was left to drop the run's database: the next run of any verb sweeps it (a `check`
    # here, which makes a schema, not a database). On a shared server another test's run may sweep
    # it first, so: it was there an instant before this run, and this run took it; or it was gone.
    killed = f"claimcheck_{cli.run_id}"
    left = our_database(cli) == [(killed,)]
    cli.run_id += "x"  # the later run is another run
    later = cli("check", "skip-locked", "--workers", "2", "--jobs", "50", "--plans", "none")
    assert later.code == 0, later.stderr
    assert f"swept database {killed}" in " ".join(later.stderr.split()) or not left, later.stderr
    with psycopg.connect(cli.server.dsn, autocommit=True) as conn:
        assert conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (killed,)).fetchall() == []


def test_lib_pgbench_puts_the_librarys_sql_next_to_its_workers(cli):
    """`--pgbench` adds pgbench's jobs/s and the ratio to the table, the JSON (schema-checked by `cli`) and the
    HTML, and the pgbench pass leaves nothing behind either."""
    result = cli("bench", "--libs", "pgqueuer", "--workers", "2", "--jobs", "60", "--pgbench", "--wide")
    assert result.code == 0, result.stderr
    assert "pgbench" in result.stdout and "ratio" in result.stdout
    doc = json.loads(next((cli.scratch / "reports").glob("bench-*.json")).read_text())
    run = doc["runs"][0]
    assert run["strategy"] == "pgqueuer" and run["pgbench"]["jobs_done"] == 60
    assert run["pgbench_jobs_per_s"] > 0 and run["pgbench_ratio"] > 0
    assert "build_dequeue_query" in run["pgbench"]["statements"]
    assert "pgbench jobs/s" in next((cli.scratch / "reports").glob("bench-*.html")).read_text()
    cli.assert_nothing_left()
    assert our_database(cli) == []
