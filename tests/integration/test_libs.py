"""Real queue libraries through their own workers, judged by the ledger (claimcheck lib).

Each library is installed by the test extra at the version docs/libraries.md names. Small runs: the
point is that the whole path (the library's installer, its enqueue API, its own worker loop,
our recording task, the ledger, the fault report) works, and what each library promises holds.
"""
import dataclasses

import psycopg
import pytest

from pg_claimcheck.libs import ADAPTERS, EXTERNAL, LibraryMissing, load_adapter
from pg_claimcheck.libs.runner import lib_settings, run_library
from pg_claimcheck.server.schema import SCHEMA_PREFIX, new_run_id
from pg_claimcheck.settings import FaultPlan

COMMAND_WORKERS = ("django-tasks", "django-q2", "taskiq-postgres")
"""Python libraries whose workers are their own commands (`manage.py db_worker`, `manage.py qcluster`,
`taskiq worker`): one short healthy and one fault test each, in tests/integration/test_command_libs.py."""
LIBRARIES = [name for name in ADAPTERS if name not in EXTERNAL and name not in COMMAND_WORKERS]
"""The other Python libraries; the Node ones are tests/integration/test_node_libs.py's."""


def adapter_or_skip(library: str):
    """The library's adapter; the test skips when its extra is not installed (the test extra installs them all)."""
    try:
        return load_adapter(library)
    except LibraryMissing:
        pytest.skip(f"{library} is not installed: pip install 'pg-claimcheck[{library}]'")


def database_exists(server, run_id: str) -> bool:
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        return conn.execute("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = %s)",
                            (f"{SCHEMA_PREFIX}{run_id}",)).fetchone()[0]


HEALTHY_JOBS = 60
"""Jobs of a healthy run, as the Node libraries' (test_node_libs.py): what it proves (each job run once, through the
library's own enqueue and worker loop, and through pgbench) holds for any count; 200 cost procrastinate's and absurd's
runs a few seconds each at their 40-60 jobs/s here. Their rates are tests/benchmarks/lib_parity.py's."""


@pytest.mark.parametrize("library", LIBRARIES)
def test_a_healthy_run_executes_every_job_exactly_once(server, library, record_property, monkeypatch):
    """As `claimcheck lib NAME` runs it, which is not silent while the library works: jobs done, the rate and
    the time on the terminal's live line (192 s without a word for 20,000 procrastinate jobs before). With
    `--pgbench`'s pass when pgbench is here (it comes with the embedded server) and the library has a cycle
    for it (dbos's claim is SQLAlchemy-built: none yet): the library's own SQL, through pgbench, finishes
    every job its own enqueue API put in its table, in the run's own database. Its figures are reported,
    not asserted (tests/benchmarks/lib_parity.py measures them)."""
    import io

    from rich.console import Console

    from pg_claimcheck.app.lib import run_libraries
    from pg_claimcheck.report.progress import ProgressEvents

    adapter = adapter_or_skip(library)
    pgbench = server.bin_dir is not None and adapter.has_pgbench_cycle()
    run_id = new_run_id()
    monkeypatch.setenv("CLAIMCHECK_RUN_ID", run_id)
    out = io.StringIO()
    err = Console(file=out, force_terminal=True, width=100, color_system=None)
    (result,) = run_libraries(server, [adapter], [lib_settings(workers=2, jobs=HEALTHY_JOBS)], ProgressEvents(err),
                              pgbench=pgbench)
    assert f"/{HEALTHY_JOBS} jobs ·" in out.getvalue() and library in out.getvalue()
    v = result.verdict
    assert result.exactly_once, (v.violations[:3], result.table, result.library)
    assert v.claims == HEALTHY_JOBS == v.unique_jobs_claimed and v.redeliveries == 0
    assert result.table.done == HEALTHY_JOBS == result.jobs_done and result.unfinished_jobs == 0
    assert result.strategy.source == f"{adapter.distribution} {adapter.version()}"
    assert result.as_dict()["library"]["promise"]
    assert not database_exists(server, run_id)  # the run's own database is gone, pgbench pass and all
    if pgbench:
        bench = result.pgbench
        assert bench is not None and bench.clients == 2
        assert bench.jobs_done == HEALTHY_JOBS, bench.as_dict()  # every freshly enqueued job finished through pgbench
        assert bench.failed == 0 and bench.jobs_per_s > 0 and result.pgbench_ratio > 0
        assert library in bench.statements
        run = result.as_dict()
        assert run["pgbench_jobs_per_s"] > 0 and run["pgbench_ratio"] > 0 and run["pgbench"]["statements"]
        record_property(f"{library} 2w {HEALTHY_JOBS} jobs", f"library {result.throughput_jobs_per_s:,.0f} jobs/s, pgbench "
                                                  f"{bench.jobs_per_s:,.0f} jobs/s, ratio {result.pgbench_ratio:.2f}")


KEEPS_ITS_PROMISE_UNDER_KILLS_AND_STALLS = ["procrastinate", "pgqueuer"]
"""saq re-ran finished jobs under these faults here (docs/libraries.md: findings), so its run is reported below."""


def run_with_faults(server, library, plan):
    settings = dataclasses.replace(lib_settings(workers=2, jobs=200, faults=True), faults=plan)
    return run_library(server, adapter_or_skip(library), settings)


@pytest.mark.parametrize("library", KEEPS_ITS_PROMISE_UNDER_KILLS_AND_STALLS)
def test_under_kills_and_stalls_nothing_is_lost_and_the_promise_holds(server, library):
    result = run_with_faults(server, library, FaultPlan(kills=1, terminates=0, stalls=1, restarts=0))
    v = result.verdict
    assert sorted(f.kind for f in result.faults) == ["kill", "stall"]
    assert v.unclaimed_jobs == 0 and result.unfinished_jobs == 0, result.library   # nothing lost
    # At least once, held to it (held_to_promise): a re-run after its worker failed (killed, or its heartbeat
    # stale: pgqueuer's claim + heartbeat_timeout, pg_claimcheck.libs.pgqueuer) is a redelivery, any other a violation.
    assert result.library["delivery"] == "at-least-once"
    assert result.exactly_once, (v.violations[:3], [f.as_dict() for f in result.faults])
    for fault in result.faults:  # each faulted job's fate, in the library's own words
        assert all(job["final_status"] not in ("?", "") for job in fault.jobs), fault.as_dict()


AT_LEAST_ONCE = [name for name in LIBRARIES if name not in ("huey", "chancy", "dbos", "absurd", "saq")]
"""huey promises at-most-once: the jobs a kill or a lost connection takes are gone, so its run ends only at the
stall limit; chancy's recovery waits out a worker's heartbeat timeout (3 s) per fault; dbos's and absurd's run every
fault kind in docs/libraries.md and their scoreboard rows, a kill and a stall here; saq's is the connection fault
alone (below). Their own tests are below."""


@pytest.mark.parametrize("library", AT_LEAST_ONCE)
def test_every_fault_kind_is_injected_and_reported(server, library, record_property):
    """Connection faults (and, for saq, kills and stalls) find real bugs in these libraries
    (docs/libraries.md: findings), so this run's verdict is reported, not asserted; what is asserted is that
    every fault landed, every job ran, and the fault report names each faulted job's fate."""
    plan = FaultPlan(kills=1, terminates=1, stalls=1, restarts=1 if server.restart else 0)
    result = run_with_faults(server, library, plan)
    kinds = ["kill", "stall", "terminate"] + (["restart"] if server.restart else [])
    assert sorted(f.kind for f in result.faults) == sorted(kinds)
    assert result.verdict.unclaimed_jobs == 0
    record_property(f"{library} under every fault kind",
                    f"exactly_once={result.exactly_once} redeliveries={result.verdict.redeliveries} "
                    f"double={result.verdict.double_claimed_jobs} unfinished={result.unfinished_jobs}")


def test_saq_under_terminated_backends_every_job_runs(server, record_property):
    """saq's fault run: the connection fault, the kind that found its bug (a job handed out from a dequeue whose
    COMMIT was lost, docs/libraries.md: findings), so its verdict is reported, not asserted. Every kind's injection
    and report is the run above's (procrastinate, pgqueuer); every kind against saq, one at a time, is
    tests/benchmarks/lib_fault_kinds.py (its kills cost three times its terminates here)."""
    result = run_with_faults(server, "saq", FaultPlan(kills=0, terminates=2, stalls=0, restarts=0))
    assert [f.kind for f in result.faults] == ["terminate", "terminate"]
    assert result.verdict.unclaimed_jobs == 0
    record_property("saq under terminated backends",
                    f"exactly_once={result.exactly_once} redeliveries={result.verdict.redeliveries} "
                    f"double={result.verdict.double_claimed_jobs} unfinished={result.unfinished_jobs}")


def test_a_role_without_createdb_is_told_what_to_grant(server):
    from pg_claimcheck.errors import ServerError
    from pg_claimcheck.libs.database import run_database
    from pg_claimcheck.server.provision import Server
    from roles import scratch_role

    with scratch_role(server.dsn, "claimcheck_nocreatedb_") as (_, dsn):
        weak = Server(dsn=dsn, source="dsn", version=server.version, version_num=server.version_num)
        with pytest.raises(ServerError, match="CREATEDB"):
            with run_database(weak, "nocreatedb", "procrastinate"):
                pass


def test_a_missing_library_says_which_extra_to_install(monkeypatch):
    import importlib

    import pg_claimcheck.libs as libs

    def missing(name):
        raise ImportError("No module named 'procrastinate'")

    monkeypatch.setattr(importlib, "import_module", missing)
    with pytest.raises(libs.LibraryMissing, match=r"pip install 'pg-claimcheck\[procrastinate\]'"):
        libs.load_adapter("procrastinate")


def test_the_public_api_has_a_library_form(server):
    import pg_claimcheck

    result = pg_claimcheck.assert_exactly_once(lib="procrastinate", server=server, workers=2, jobs=100)
    assert result.table.done == 100 and result.library["name"] == "procrastinate"
    with pytest.raises(TypeError):
        pg_claimcheck.run("skip-locked", lib="procrastinate", server=server)


FED_AT_40_PER_S = [name for name in LIBRARIES if name not in ("huey", "chancy", "absurd")]
"""huey's and chancy's enqueue (a transaction per job, from one producer) reached 12 and 4 jobs/s at load 25 here, a
few jobs in this short window; their --rate runs are in docs/libraries.md. absurd's is in its scoreboard row: its
tests are the healthy run above and its fault test below."""


@pytest.mark.parametrize("library", FED_AT_40_PER_S)
def test_a_library_fed_through_its_own_enqueue_while_it_works_is_judged_like_its_seeded_jobs(server, library,
                                                                                             record_property):
    """Every job the producer enqueued (the schedule asks for 60; a loaded machine lets it enqueue fewer, which
    the report says and tests/benchmarks/rate_timings.py measures) is judged exactly once beside the seeded ten."""
    run_id = new_run_id()
    result = run_library(server, adapter_or_skip(library), lib_settings(workers=2, jobs=10, duration_s=1.5,
                                                                     rate_per_s=40), run_id=run_id)
    p, v = result.producer, result.verdict
    assert result.exactly_once and result.stopped_by == "drained", (v.violations[:3], result.table, result.library)
    assert p.scheduled == 60 and 1 <= p.enqueued <= 60
    fed = 10 + p.enqueued
    assert result.seeded.count == fed == v.claims == v.unique_jobs_claimed and result.table.done == fed
    assert v.unclaimed_jobs == 0 and v.unexpected_jobs == 0
    assert p.pickup_latency_ms["count"] == p.enqueued == p.end_to_end_latency_ms["count"]
    assert result.as_dict()["offered_rate_per_s"] == 40
    assert not database_exists(server, run_id)
    record_property(f"{library} fed at 40 jobs/s for 1.5 s", f"{p.enqueued} of 60 enqueued, achieved "
                    f"{p.achieved_rate_per_s:,.1f} jobs/s, {p.claimed_before_last_enqueue} claimed before the last enqueue")


def test_huey_runs_no_task_twice_through_a_stall(server):
    """huey has no lease: a consumer blocked far past any timeout keeps its task, and nobody else runs it."""
    result = run_with_faults(server, "huey", FaultPlan(kills=0, terminates=0, stalls=1, restarts=0))
    v = result.verdict
    assert [f.kind for f in result.faults] == ["stall"]
    assert result.exactly_once and v.redeliveries == 0 and v.double_claimed_jobs == 0, v.violations[:3]
    assert result.table.done == 200 and result.library["delivery"] == "at-most-once"


def test_huey_losing_a_killed_consumers_task_is_what_it_promised(server, monkeypatch):
    """A SIGKILLed consumer takes the task it ran with it: huey's docs say such tasks are lost, so the run is
    not failed for it; it is reported (`lost_as_promised`), and no task ran twice. (The run ends at the
    stall limit, the lost task never finishing: shortened here.)"""
    from pg_claimcheck.engine import supervisor

    # 12 s after the last job finished (the workers' start-up, until their hello, is not counted)
    monkeypatch.setattr(supervisor, "STALL_TIMEOUT_S", 12.0)
    result = run_with_faults(server, "huey", FaultPlan(kills=1, terminates=0, stalls=0, restarts=0))
    v = result.verdict
    assert [f.kind for f in result.faults] == ["kill"]
    assert v.double_claimed_jobs == 0 and v.reruns_against_promise == 0, v.violations[:3]
    assert result.table.done + v.lost_as_promised == 200
    assert result.exactly_once, (v.violations[:3], result.library)


def test_chancy_recovers_a_killed_and_a_stalled_workers_jobs(server, record_property):
    """chancy's Recovery gives back the running jobs of a worker whose heartbeat went stale: nothing is lost.
    Whether it ran a job twice is reported, not asserted (docs/libraries.md: chancy)."""
    import psutil

    def orphans() -> set[int]:  # what a SIGKILLed chancy worker would leave: its multiprocessing manager
        return {p.pid for p in psutil.process_iter(["ppid", "cmdline"])
                if p.info["ppid"] == 1 and "multiprocessing" in " ".join(p.info["cmdline"] or [])}

    before = orphans()
    result = run_with_faults(server, "chancy", FaultPlan(kills=1, terminates=0, stalls=1, restarts=0))
    v = result.verdict
    assert orphans() <= before  # the killed worker's process group went with it
    assert sorted(f.kind for f in result.faults) == ["kill", "stall"]
    assert v.unclaimed_jobs == 0 and result.unfinished_jobs == 0 and result.table.done == 200, result.library
    record_property("chancy under a kill and a stall",
                    f"exactly_once={result.exactly_once} redeliveries={v.redeliveries} "
                    f"double={v.double_claimed_jobs} kinds={sorted({x.kind for x in v.violations})}")


def test_dbos_recovers_a_killed_workers_workflow_and_leaves_a_stalled_one_alone(server, record_property):
    """DBOS has no lease: a stalled process keeps its workflow; a killed one's PENDING workflow is recovered by
    the replacement's launch (every process has DBOS's default executor id, `local`): nothing is lost.
    Whether the recovery also re-ran a live process's workflow is reported, not asserted (docs/libraries.md: dbos)."""
    result = run_with_faults(server, "dbos", FaultPlan(kills=1, terminates=0, stalls=1, restarts=0))
    v = result.verdict
    assert sorted(f.kind for f in result.faults) == ["kill", "stall"]
    assert v.unclaimed_jobs == 0 and result.unfinished_jobs == 0 and result.table.done == 200, result.library
    assert result.library["delivery"] == "at-least-once"
    record_property("dbos under a kill and a stall",
                    f"exactly_once={result.exactly_once} redeliveries={v.redeliveries} "
                    f"double={v.double_claimed_jobs} kinds={sorted({x.kind for x in v.violations})}")


def test_absurd_gives_a_killed_and_a_stalled_workers_task_back_after_its_claim_timeout(server):
    """Absurd's lease is the claim timeout (2 s under --faults), which the next worker's claim_task sweeps: a killed
    worker's task and a stalled one's run again elsewhere (a redelivery; the stalled one beside it, "brief overlapping
    execution", which its docs allow), and every task ends completed."""
    settings = dataclasses.replace(lib_settings(workers=2, jobs=60, faults=True),
                                   faults=FaultPlan(kills=1, terminates=0, stalls=1, restarts=0))
    result = run_library(server, adapter_or_skip("absurd"), settings)
    v = result.verdict
    assert sorted(f.kind for f in result.faults) == ["kill", "stall"]
    assert v.unclaimed_jobs == 0 and result.unfinished_jobs == 0 and result.table.done == 60, result.library
    assert result.exactly_once, (v.violations[:3], [f.as_dict() for f in result.faults])
    assert result.library["delivery"] == "at-least-once"
