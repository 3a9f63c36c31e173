"""pgbench at a rate (tests/benchmarks/rate.py's other side): each scheduled script enqueues one job
and works one, and every script's latency and schedule lag come back from pgbench's log. Figures are
the benchmark's, not asserted here."""
import pytest

from pg_claimcheck.contract.strategy import load_strategy
from pg_claimcheck.engine.pgbench import run_pgbench_at_rate
from pg_claimcheck.server.schema import build_jobs_table
from pg_claimcheck.server.session import run_schema
from pg_claimcheck.settings import RunSettings, WorkTime


def test_pgbench_at_a_rate_enqueues_each_scheduled_job_works_one_per_script_and_logs_each_script(server):
    if server.bin_dir is None:
        pytest.skip("pgbench comes with the embedded server; this server has no client tools we know of")
    settings = RunSettings(workers=2, jobs=1, batch=1, work=WorkTime("fixed", 0.0))
    with run_schema(server) as (conn, run):
        build_jobs_table(conn, run.schema, 1)
        counts, done = run_pgbench_at_rate(conn, run, server.bin_dir, load_strategy("skip-locked"), settings,
                                           rate_per_s=200, duration_s=0.5)
        first, last, jobs = conn.execute("SELECT min(id), max(id), count(*) FROM jobs").fetchone()
        queued = conn.execute("SELECT count(*) FROM jobs WHERE status = 'queued'").fetchone()[0]
    assert counts.scripts == 100 and counts.failed == 0  # ceil(200 x 0.5) jobs, 50 per client
    assert (first, last, jobs) == (1, 101, 101)  # the seeded job, then one new key per script, none twice
    # Each script claims one job and completes it: none is left running. A claim can, for a moment, find every
    # queued row locked by the other client's claim (SKIP LOCKED) and take none, leaving one more job queued.
    assert done + queued == 101 and done >= 95, (done, queued)
    assert len(counts.logged) == 100
    assert all(latency >= lag >= 0 for latency, lag in counts.logged)  # latency runs from the scheduled start
