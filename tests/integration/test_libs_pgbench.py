"""`claimcheck lib --pgbench`: each library's own worker cycle through pgbench, on a real server.

Small runs: the point is that the pgbench pass finishes every job the library's own enqueue API
put in its table, in the run's own database, and that the result carries a ratio. Figures are
reported, not asserted (tests/benchmarks/lib_parity.py measures them).
"""
import psycopg
import pytest

from pg_claimcheck.errors import UsageError
from pg_claimcheck.libs import ADAPTERS, EXTERNAL, load_adapter
from pg_claimcheck.libs.parity import check_cycles
from pg_claimcheck.libs.runner import lib_settings, run_library
from pg_claimcheck.server.schema import SCHEMA_PREFIX, new_run_id

JOBS = 200


def database_exists(server, run_id: str) -> bool:
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        return conn.execute("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = %s)",
                            (f"{SCHEMA_PREFIX}{run_id}",)).fetchone()[0]


NO_SCRIPT = {"dbos"}
"""Libraries whose claim has no pgbench script yet (dbos's is SQLAlchemy-built; `lib dbos --pgbench` says so)."""
WITH_SCRIPT = [name for name in ADAPTERS if name not in EXTERNAL and name not in NO_SCRIPT]


@pytest.mark.parametrize("library", WITH_SCRIPT)
def test_pgbench_finishes_every_job_with_the_librarys_own_sql(server, library, record_property):
    if server.bin_dir is None:
        pytest.skip("pgbench comes with the embedded server; this server has no client tools we know of")
    run_id = new_run_id()
    result = run_library(server, load_adapter(library), lib_settings(workers=2, jobs=JOBS), run_id=run_id,
                         pgbench=True)
    assert result.exactly_once and result.jobs_done == JOBS  # the library's own run, as without --pgbench
    bench = result.pgbench
    assert bench is not None and bench.clients == 2
    assert bench.jobs_done == JOBS, bench.as_dict()  # every freshly enqueued job finished through pgbench
    assert bench.failed == 0 and bench.jobs_per_s > 0 and result.pgbench_ratio > 0
    assert library in bench.statements
    run = result.as_dict()
    assert run["pgbench_jobs_per_s"] > 0 and run["pgbench_ratio"] > 0 and run["pgbench"]["statements"]
    assert not database_exists(server, run_id)  # the run's database is gone, pgbench pass and all
    record_property(f"{library} 2w {JOBS} jobs", f"library {result.throughput_jobs_per_s:,.0f} jobs/s, pgbench "
                                                 f"{bench.jobs_per_s:,.0f} jobs/s, ratio {result.pgbench_ratio:.2f}")


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
