"""The external adapter protocol's records -> the recording task's lines -> the ledger's executions."""
import json

from pg_claimcheck.libs.external import node_url, runtime_env, to_records
from pg_claimcheck.libs.records import parse


def lines(*records) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def test_one_job_run_twice_at_once_in_one_worker_keeps_each_end_with_its_start():
    text = lines({"event": "hello", "protocol": 1, "library": "x", "version": "1"},
                 {"event": "start", "run": 1, "key": 7, "job": "a", "attempt": 1, "t": 100.0, "claimed_at": 99.5},
                 {"event": "start", "run": 2, "key": 7, "job": "a", "attempt": 2, "t": 102.0, "claimed_at": 102.0},
                 {"event": "end", "run": 1, "key": 7, "t": 103.0},
                 {"event": "end", "run": 2, "key": 7, "t": 105.0})
    records, hello = to_records(text, offset_s=90.0)
    assert hello["library"] == "x"
    first, second = parse(0, records)[0]
    assert (first.started, first.claimed, first.ended) == (10.0, 9.5, 13.0)
    assert (second.started, second.ended) == (12.0, 15.0)


def test_a_torn_last_line_and_a_stall_without_an_end():
    text = lines({"event": "start", "run": 1, "key": 3, "job": "j", "attempt": None, "t": 50.0, "claimed_at": None},
                 {"event": "stall", "run": 1, "key": 3, "t": 50.5}) + '{"event": "end", "ru'
    executions, stalls = parse(1, to_records(text, 0.0)[0])
    assert len(executions) == 1 and executions[0].claimed == 50.0 and executions[0].stalled_at == 50.5
    assert stalls == [50.5] and executions[0].ended != executions[0].ended  # never ended (NaN)


def test_a_libpq_dsn_becomes_the_url_node_postgres_reads_and_its_password_an_environment_variable():
    assert node_url("host=127.0.0.1 port=5432 user=postgres dbname=claimcheck_x application_name=claimcheck/r/w01") \
        == "postgresql://postgres@127.0.0.1:5432/claimcheck_x?application_name=claimcheck%2Fr%2Fw01"
    assert node_url("host='/tmp/pg sock' port=5433 user=u password=p@ss dbname=d") \
        == "postgresql://u@%2Ftmp%2Fpg%20sock:5433/d"
    assert runtime_env("host=h user=u password=p@ss dbname=d")["PGPASSWORD"] == "p@ss"


def test_a_workers_command_line_carries_its_work_time_once_as_the_scripts_work_object(tmp_path):
    from pg_claimcheck.libs._adapter import WorkerConfig
    from pg_claimcheck.libs.pgboss import PgBossAdapter

    adapter = PgBossAdapter()
    adapter._modules = tmp_path  # as if the library were installed there
    config = WorkerConfig(library="pg-boss", dsn="host=/tmp dbname=cc", worker=3, records=str(tmp_path / "w03.tsv"),
                          stall_flag=str(tmp_path / "stall-w03"), work_ms="1-5", stall_s=0.0, faults=False)
    said = json.loads(adapter.worker_argv(config)[-1])
    assert said["work"] == {"kind": "uniform", "a_ms": 1.0, "b_ms": 5.0}
    assert "work_ms" not in said and said["worker"] == 3


def test_an_external_workers_records_file_is_its_protocol_lines_read_as_every_workers(tmp_path):
    from pg_claimcheck.libs.external import hello
    from pg_claimcheck.libs.graphile import GraphileWorkerAdapter

    (tmp_path / "w02.tsv").write_text(lines(
        {"event": "hello", "protocol": 1, "library": "graphile-worker", "version": "9.9.9", "worker": 2, "pid": 1,
         "library_worker": "pool-1"},
        {"event": "start", "run": 1, "key": 7, "job": "7", "attempt": 1, "t": 100.0, "claimed_at": None},
        {"event": "end", "run": 1, "key": 7, "t": 100.5}))
    files, version = GraphileWorkerAdapter().worker_records(tmp_path)
    assert list(files) == [2] and [line.split("\t")[:2] for line in files[2].splitlines()] == [["S", "7"], ["E", "7"]]
    assert version == "9.9.9" and hello(tmp_path / "w02.tsv")["library_worker"] == "pool-1"


def test_a_worker_whose_hello_speaks_another_protocol_is_refused_in_words(tmp_path):
    import pytest

    from pg_claimcheck.errors import UsageError
    from pg_claimcheck.libs.pgboss import PgBossAdapter

    (tmp_path / "w00.tsv").write_text(lines(
        {"event": "hello", "protocol": 2, "library": "pg-boss", "version": "1", "worker": 0, "pid": 1}))
    with pytest.raises(UsageError, match="speaks protocol 2 .* reads protocol 1"):
        PgBossAdapter().worker_records(tmp_path)
