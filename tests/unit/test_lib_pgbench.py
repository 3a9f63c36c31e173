"""The pgbench scripts of the libraries' worker cycles: built from each installed library's own statements.

No server: these check the script text. That it runs (and finishes every job) is
the healthy runs of tests/integration/test_libs.py.
"""
import inspect
import re
from datetime import timedelta
from importlib.metadata import version

import pytest

from pg_claimcheck.contract.dialect import rows_as_cte, substitute_numbered
from pg_claimcheck.errors import UsageError
from pg_claimcheck.libs import load_adapter
from pg_claimcheck.libs._adapter import LibraryAdapter

NUMBERED_RE = re.compile(r"\$[0-9]+")
NAMED_RE = re.compile(r"%\([a-z_]+\)s")


def pieces(statement: str, placeholder: re.Pattern) -> list[str]:
    """The statement's text between its placeholders, line by line: what the script must carry unchanged
    (a line, since the final query of a WITH statement moves into a CTE of its own)."""
    return [line.strip() for p in placeholder.split(statement.strip().rstrip(";")) for line in p.splitlines()
            if line.strip()]


def assert_carries(script: str, statement: str, placeholder: re.Pattern) -> None:
    for piece in pieces(statement, placeholder):
        assert piece in script, piece


def test_procrastinate_cycle_is_its_own_fetch_and_finish():
    from procrastinate.sql import queries

    cycle = load_adapter("procrastinate").pgbench_cycle(0)
    assert_carries(cycle.script, queries["fetch_job"], NAMED_RE)
    assert_carries(cycle.script, queries["finish_job"], NAMED_RE)
    assert "%(" not in cycle.script and cycle.jobs == 1
    assert cycle.per_client == {"cc_workers": queries["register_worker"]}
    # each statement in its own transaction, as the connector's pool runs it
    assert cycle.script.count("BEGIN;") == 2 and cycle.script.count("COMMIT;") == 2


def test_pgqueuer_cycle_is_its_own_dequeue_and_log_with_run_defaults():
    import uuid

    from pgqueuer import QueueManager
    from pgqueuer.adapters.persistence.qb import QueryQueueBuilder

    defaults = inspect.signature(QueueManager.run).parameters
    batch = defaults["batch_size"].default
    dequeue = QueryQueueBuilder().build_dequeue_query(
        batch_size=batch, entrypoints=["claimcheck_record"], concurrency_limits=[0], queue_manager_id=uuid.uuid4(),
        global_concurrency_limit=None, heartbeat_timeout=defaults["heartbeat_timeout"].default)
    cycle = load_adapter("pgqueuer").pgbench_cycle(0)
    assert_carries(cycle.script, dequeue.sql, NUMBERED_RE)
    assert_carries(cycle.script, QueryQueueBuilder().build_log_job_query(), NUMBERED_RE)
    assert not NUMBERED_RE.search(cycle.script) and cycle.jobs == batch
    assert f"LIMIT {batch}" in cycle.script and "BEGIN" not in cycle.script  # autocommit, as pgqueuer requires
    # its log INSERT stays a top-level CTE: the dequeue's final query is what moved
    assert cycle.script.index("log_pick AS (") < cycle.script.index("cc_rows AS (")


def test_saq_sql_was_copied_from_the_installed_version():
    """The copies in sql/saq.sql are saq's inline SQL of one version: a newer saq must be read again."""
    from pg_claimcheck.libs.saq import SQL_COPIED_FROM

    assert version("saq") == SQL_COPIED_FROM, (
        f"saq {version('saq')} is installed, sql/saq.sql was copied from {SQL_COPIED_FROM}: compare "
        "PostgresQueue._dequeue, _update and _notify in saq/queue/postgres.py and copy them again")


def test_saq_copies_are_in_the_installed_source_word_for_word():
    from saq.queue.postgres import PostgresQueue

    from pg_claimcheck.libs.saq import SAQ_SQL

    def words(text: str) -> str:
        return " ".join(text.split())

    for method, name in [(PostgresQueue._dequeue, "dequeue"), (PostgresQueue._update, "update"),
                         (PostgresQueue._update, "update_expire_at"), (PostgresQueue._notify, "notify")]:
        assert words(SAQ_SQL[name]) in words(inspect.getsource(method)), name


def test_saq_cycle_carries_the_copies_and_its_worker_concurrency():
    from saq import Worker

    from pg_claimcheck.libs.saq import SAQ_SQL

    cycle = load_adapter("saq").pgbench_cycle(2000)
    field = re.compile(r"\{[a-z_]+\}|%\([a-z_]+\)s")
    for name in ("dequeue", "update"):
        assert_carries(cycle.script, SAQ_SQL[name], field)
    concurrency = inspect.signature(Worker.__init__).parameters["concurrency"].default
    assert cycle.jobs == concurrency and f"LIMIT {concurrency}" in cycle.script
    assert cycle.script.count("SAVEPOINT cc_") == 2 * concurrency  # one savepoint and its release per job
    assert cycle.script.count("\\sleep 2000 us") == 1  # the batch's tasks run concurrently
    assert "NOTIFY U&\"saq\\003Adefault\"" in cycle.script  # pgbench would read ':default' as its variable


def test_a_saq_other_than_the_copy_is_refused(monkeypatch):
    import pg_claimcheck.libs.saq as saq_adapter

    monkeypatch.setattr(saq_adapter, "SQL_COPIED_FROM", "0.0.1")
    with pytest.raises(UsageError, match="copied from saq 0.0.1"):
        saq_adapter.ADAPTER.pgbench_cycle(0)


def test_an_adapter_without_a_cycle_says_so():
    class Bare(LibraryAdapter):
        name = "bare"

    with pytest.raises(UsageError, match="no pgbench script for bare"):
        Bare().pgbench_cycle(0)


def test_rows_as_cte_keeps_data_modifying_ctes_at_the_top_level():
    statement = ("WITH a(x) AS (SELECT 1), b AS (INSERT INTO t SELECT x FROM a RETURNING *) -- a comment )\n"
                 "SELECT * FROM b ORDER BY (x);")
    out = rows_as_cte(statement, "cc", "SELECT count(*) FROM cc")
    assert out.startswith("WITH a(x) AS (SELECT 1), b AS (INSERT INTO t SELECT x FROM a RETURNING *),\ncc AS (")
    assert out.endswith("SELECT * FROM b ORDER BY (x)\n)\nSELECT count(*) FROM cc")
    assert rows_as_cte("UPDATE t SET y = ')' RETURNING id", "cc", "SELECT 1") == \
        "WITH cc AS (\nUPDATE t SET y = ')' RETURNING id\n)\nSELECT 1"


def test_rows_as_cte_reads_escape_strings_and_nested_comments_as_postgresql_does():
    # The statement splitter's lexer and this one were two; they disagreed on both of these.
    out = rows_as_cte(r"WITH a AS (SELECT E'x\')' AS v) SELECT * FROM a", "cc", "SELECT 1")
    assert out == "WITH a AS (SELECT E'x\\')' AS v),\ncc AS (\nSELECT * FROM a\n)\nSELECT 1"
    out = rows_as_cte("WITH a AS (SELECT 1 /* ) /* ) */ ) */ AS v) SELECT * FROM a", "cc", "SELECT 1")
    assert out.startswith("WITH a AS (SELECT 1 /* ) /* ) */ ) */ AS v),\ncc AS (")


def test_numbered_placeholders_are_replaced_outside_dollar_quotes():
    assert substitute_numbered("f($1, $12) || $$x$$ || a$1", lambda n: f"<{n}>") == "f(<1>, <12>) || $$x$$ || a$1"


def test_heartbeat_default_is_what_the_script_uses():
    from pgqueuer import QueueManager

    timeout = inspect.signature(QueueManager.run).parameters["heartbeat_timeout"].default
    assert isinstance(timeout, timedelta)
    assert f"'{timeout}'::interval" in load_adapter("pgqueuer").pgbench_cycle(0).script


def test_huey_copies_are_the_statements_its_storage_sends():
    """sql/huey.sql is huey's inline SQL of one version, checked against what PostgresStorage sends (a cursor
    that records instead of a server)."""
    import contextlib

    from pg_claimcheck.libs.huey import HUEY_SQL, SQL_COPIED_FROM, _huey

    assert version("huey") == SQL_COPIED_FROM, (
        f"huey {version('huey')} is installed, sql/huey.sql was copied from {SQL_COPIED_FROM}: compare "
        "PostgresStorage._dequeue, peek_many and put_data in huey/storage.py and copy them again")
    sent = []

    class Cursor:
        def execute(self, query, params=()):
            sent.append(query)

        def fetchone(self):
            return None

        def fetchall(self):
            return []

    huey, _ = _huey("", create_tables=False)
    storage = huey.storage
    storage.db = lambda commit=False, close=False: contextlib.nullcontext(Cursor())
    storage._dequeue()
    storage.peek_many(["k"])
    storage.put_data("k", b"v")
    tables = {"dequeue": storage.table_task, "peek_many": storage.table_kv, "put_data": storage.table_kv}
    for (name, table), query in zip(tables.items(), sent):
        assert NAMED_RE.sub("%s", HUEY_SQL[name].format(t=table)) == query, name


def test_huey_cycle_is_one_task_as_a_consumer_thread_takes_it():
    from pg_claimcheck.libs.huey import HUEY_SQL

    script = load_adapter("huey").pgbench_cycle(2000).script
    for name in ("dequeue", "peek_many", "put_data"):
        assert_carries(script, HUEY_SQL[name].replace("{t}", "huey_task" if name == "dequeue" else "huey_kv"),
                       NAMED_RE)
    assert "\\sleep 2000 us" in script and "U&'rt\\003A" in script  # pgbench would read ':claimcheck' as its variable


def test_chancy_copies_are_in_the_installed_source_word_for_word():
    from chancy import Worker

    from pg_claimcheck.libs.chancy import CHANCY_SQL, SQL_COPIED_FROM

    assert version("chancy") == SQL_COPIED_FROM, (
        f"chancy {version('chancy')} is installed, sql/chancy.sql was copied from {SQL_COPIED_FROM}: compare "
        "Worker.fetch_jobs and _maintain_updates in chancy/worker.py and copy them again")

    def words(text: str) -> str:
        return " ".join(text.split())

    for method, name in [(Worker.fetch_jobs, "fetch"), (Worker._maintain_updates, "update")]:
        source = inspect.getsource(method)
        if name == "update" and "UPDATE" not in source:  # the flush itself is a method of its own
            source = inspect.getsource(Worker)
        assert words(CHANCY_SQL[name]) in words(source), name
    assert "(CAST(:cc_ids AS uuid[]))[10]" in load_adapter("chancy").pgbench_cycle(0).script


def test_absurd_calls_are_the_sdks_word_for_word_and_its_cycle_claims_one_task():
    """sql/absurd.sql copies the SDK's calls of Absurd's stored functions, its `%s` named: the same text else."""
    import absurd_sdk

    from pg_claimcheck.libs.absurd import ABSURD_SQL, SQL_COPIED_FROM

    assert version("absurd-sdk") == SQL_COPIED_FROM, (
        f"absurd-sdk {version('absurd-sdk')} is installed, sql/absurd.sql was copied from {SQL_COPIED_FROM}: compare "
        "AsyncAbsurd.claim_tasks and _complete_task_run_async in absurd_sdk/__init__.py and copy them again")

    def words(text: str) -> str:
        return " ".join(NAMED_RE.sub("%s", text).split())

    for function, name in [(absurd_sdk.AsyncAbsurd.claim_tasks, "claim"),
                           (absurd_sdk._complete_task_run_async, "complete")]:
        assert words(ABSURD_SQL[name]) in words(inspect.getsource(function)), name
    from pg_claimcheck.libs.absurd import CLAIM_TIMEOUT_S

    assert inspect.signature(absurd_sdk.AsyncAbsurd.start_worker).parameters["claim_timeout"].default == CLAIM_TIMEOUT_S
    cycle = load_adapter("absurd").pgbench_cycle(1000)
    assert "absurd.claim_task('claimcheck', 'claimcheck-pgbench-' || :client_id, 120, 1)" in cycle.script
    assert "absurd.complete_run('claimcheck', CAST(:cc_run AS uuid), 'null')" in cycle.script
    assert cycle.jobs == 1 and "\\sleep 1000 us" in cycle.script and "%(" not in cycle.script
