"""graphile-worker, pg-boss (10 and 12) and BullMQ's PostgreSQL backend through their own Node
workers, judged by the ledger (claimcheck lib).

The libraries are installed once into the per-user cache (pg_claimcheck.libs.external; the session
fixture below), so a run does not ask the npm registry again. Small runs: the whole path (npm,
the library's migrations, its enqueue API, its own worker loop, the JSON-lines records, the
ledger, the fault report) works, and pg-boss's handler that outlives its expiry is caught.
"""
import dataclasses
import os
import shutil
import subprocess
import sys

import pytest

from pg_claimcheck.engine.pgbench import pgbench_path
from pg_claimcheck.errors import UsageError
from pg_claimcheck.libs import EXTERNAL, load_adapter
from pg_claimcheck.libs.npm import cache_root, node_major

NODE = sorted(name for name in EXTERNAL if name != "delayed_job")  # Ruby's: test_ruby_libs.py
from pg_claimcheck.libs.runner import lib_settings, run_library
from pg_claimcheck.settings import FaultPlan


@pytest.fixture(scope="session")
def node_libs():
    """Both adapters, their libraries installed (once, into the cache); skips when that cannot be."""
    if shutil.which("node") is None:
        pytest.skip("no node on PATH: the Node libraries' tests need Node.js 20 (and npm, once)")
    if shutil.which("npm") is None:
        pytest.skip("no npm on PATH: the Node libraries' tests install them with npm (once)")
    try:
        return {name: load_adapter(name) for name in NODE}
    except UsageError as exc:
        pytest.skip(f"the Node libraries could not be installed: {str(exc)[:200]}")


def has_pgbench(server) -> bool:
    try:
        pgbench_path(server.bin_dir)
        return True
    except UsageError:
        return False


@pytest.mark.parametrize("library", NODE)
def test_a_healthy_run_executes_every_job_exactly_once(server, node_libs, library):
    """With the pgbench pass when pgbench is here: the library's own SQL finishes every job too."""
    adapter = node_libs[library]
    pgbench = has_pgbench(server) and adapter.has_pgbench_cycle()
    result = run_library(server, adapter, lib_settings(workers=2, jobs=60), pgbench=pgbench)
    v = result.verdict
    assert result.exactly_once, (v.violations[:3], result.table, result.library)
    assert v.claims == 60 and v.unique_jobs_claimed == 60 and v.redeliveries == 0
    assert result.table.done == 60 and result.unfinished_jobs == 0
    assert result.library["version"] == adapter.pinned  # what the workers said they ran (their hello)
    assert result.strategy.source == f"{adapter.package} (npm) {adapter.pinned}"
    if pgbench:
        assert result.pgbench.jobs_done == 60 and result.pgbench.failed == 0, result.pgbench.as_dict()
        assert result.pgbench_ratio > 0 and library in result.pgbench.statements


def test_a_pg_boss_handler_that_outlives_its_expiry_runs_beside_its_retry(server, node_libs):
    """Work longer than expireInSeconds: pg-boss's own worker gives up on the handler (its
    resolveWithinSeconds), fails the job and fetches its retry while the handler still runs. No
    worker failed, so "exactly-once delivery" is broken: the ledger says concurrent."""
    from pg_claimcheck.libs.pgboss import EXPIRE_S

    # The cap counts from the worker's hello (pg_claimcheck.libs.runner), not from Node's start-up
    settings = lib_settings(workers=1, jobs=2, work_ms=str(EXPIRE_S * 1000 + 1500), duration_s=EXPIRE_S + 6)
    result = run_library(server, node_libs["pg-boss"], settings)
    v = result.verdict
    # How many of the two jobs get their retry fetched before the run's end depends on pg-boss's
    # maintenance tick (1 s) against the cap: one is the proof, either may be it.
    assert not result.exactly_once and v.double_claimed_jobs >= 1, v.violations
    assert {x.kind for x in v.violations} == {"concurrent"}
    assert v.redeliveries == 0  # no worker failed: nothing allowed it


def test_graphile_worker_under_a_kill_and_a_stall_loses_nothing_and_keeps_its_promise(server, node_libs):
    """A killed worker's job is given back by forceUnlockWorkers (the coordinator's recovery); a
    stalled one keeps its 4-hour lock, so nobody else runs it meanwhile."""
    settings = dataclasses.replace(lib_settings(workers=2, jobs=100, faults=True),
                                   faults=FaultPlan(kills=1, terminates=0, stalls=1, restarts=0))
    result = run_library(server, node_libs["graphile-worker"], settings)
    v = result.verdict
    assert sorted(f.kind for f in result.faults) == ["kill", "stall"]
    assert v.unclaimed_jobs == 0 and result.unfinished_jobs == 0, result.library
    assert result.exactly_once, (v.violations[:3], [f.as_dict() for f in result.faults])


def test_a_library_whose_engines_want_node_22_runs_on_node_22_from_npm_where_the_machine_has_an_older(node_libs):
    """pg-boss 12 wants Node >= 22.12: on a machine with Node 20 it runs on npm's Node 22, in the cache."""
    adapter, system = node_libs["pg-boss-12"], shutil.which("node")
    if node_major(system) >= 22:
        assert adapter.runtime_path() == system
    else:
        assert adapter.runtime_path().startswith(str(cache_root() / "node")) and node_major(adapter.runtime_path()) == 22
        assert node_libs["bullmq"].runtime_path() == system  # a library content with Node 20 keeps the machine's


@pytest.mark.parametrize("library", ["pg-boss-12", "bullmq"])
def test_a_killed_and_a_stalled_worker_s_job_comes_back_once_its_lease_ran_out(server, node_libs, library):
    """pg-boss 12's expiry (its supervise pass) and BullMQ's stalled-lock check each give a failed worker's
    job to another worker: a redelivery, and every job ends finished."""
    settings = dataclasses.replace(lib_settings(workers=2, jobs=60, faults=True),
                                   faults=FaultPlan(kills=1, terminates=0, stalls=1, restarts=0))
    result = run_library(server, node_libs[library], settings)
    v = result.verdict
    assert sorted(f.kind for f in result.faults) == ["kill", "stall"]
    assert v.unclaimed_jobs == 0 and result.unfinished_jobs == 0, result.library
    assert result.exactly_once, (v.violations[:3], [f.as_dict() for f in result.faults])


def test_without_node_lib_says_what_is_missing_and_exits_2(tmp_path):
    env = {**os.environ, "PATH": str(tmp_path), "CLAIMCHECK_CACHE": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-m", "pg_claimcheck", "lib", "graphile-worker", "--jobs", "10"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "no node on PATH" in done.stderr and "nodejs" in done.stderr


FED_AT_10_PER_S = [name for name in NODE if name != "sidequest"]
"""sidequest's enqueue finds its job class's file from the stack on every call (buildPath): its feed reached 1 job in
the first second at load 22 here, so its --rate run is its scoreboard row's, not this test's."""


@pytest.mark.parametrize("library", FED_AT_10_PER_S)
def test_a_node_library_fed_through_its_own_enqueue_while_it_works_is_judged_like_its_seeded_jobs(
        server, node_libs, library):
    """The script's `feed` enqueues each key as the producer sends it (addJob, send), its workers running."""
    # 10 jobs/s: a library whose enqueue takes 100 ms at load 40 (BullMQ's add) still keeps the schedule
    result = run_library(server, node_libs[library], lib_settings(workers=2, jobs=10, duration_s=1.0, rate_per_s=10))
    p, v = result.producer, result.verdict
    assert result.exactly_once and result.stopped_by == "drained", (v.violations[:3], result.table, result.library)
    assert p.enqueued == p.scheduled == 10 and result.seeded.count == 20 == v.claims == v.unique_jobs_claimed
    assert v.unclaimed_jobs == 0 and p.pickup_latency_ms["count"] == 10


def test_sidequest_gives_a_killed_engines_job_back_with_its_stale_job_routine(server, node_libs):
    """A SIGKILLed worker takes its forked engine with it (the engine exits when its parent's IPC channel closes,
    and the coordinator reaps the worker's process group); the job it ran stays `running` until sidequest's
    stale-job routine retries it: a redelivery, nothing lost. The routine is a cron of whole minutes, so this run
    lasts up to a minute and a half (sidequest.FAULTS_STALE_MS past the job's start, then the next minute)."""
    settings = dataclasses.replace(lib_settings(workers=2, jobs=40, faults=True),
                                   faults=FaultPlan(kills=1, terminates=0, stalls=0, restarts=0))
    result = run_library(server, node_libs["sidequest"], settings)
    v = result.verdict
    assert [f.kind for f in result.faults] == ["kill"]
    assert v.unclaimed_jobs == 0 and result.unfinished_jobs == 0, result.library
    assert result.exactly_once, (v.violations[:3], [f.as_dict() for f in result.faults])
