"""The SQL dialect, keys of any type, per-run key ranges, and the ledger's lease and shape rules."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from pg_claimcheck.contract.dialect import placeholders, split_statements, substitute, to_positional
from pg_claimcheck.contract.keys import KeySpace, unknown_number
from pg_claimcheck.contract.sqlfile import parse_sql_text
from pg_claimcheck.contract.strategy import HEADER_KEYS, strategy_from_file
from pg_claimcheck.errors import SqlFileError
from pg_claimcheck.server.schema import KEY_RANGE_BITS, key_base
from pg_claimcheck.verdict.ledger import DONE, FAILED, STALE, WorkerLog, judge


def test_split_keeps_dollar_quotes_strings_and_comments_whole():
    text = """CREATE FUNCTION f() RETURNS int LANGUAGE plpgsql AS $$ BEGIN; RETURN 1; END $$;
-- a comment; with a semicolon
DO $x$ BEGIN PERFORM 'a;b'; END $x$;
SELECT 'it''s;', E'\\';', "odd;name" /* ; */ FROM t;
"""
    parts = split_statements(text)
    assert [p[0].split()[0] for p in parts] == ["CREATE", "--", "SELECT"]
    assert parts[1][0].endswith("END $x$") and parts[1][1] == 1
    assert parts[2][1] == 3
    assert split_statements("SELECT 1;\n\n-- only a comment\n") == [("SELECT 1", 0)]


def test_one_parameter_dialect():
    sql = "SELECT %(a)s, %(b)s, %(a)s, '100%%'"
    assert placeholders(sql) == {"a", "b"}
    assert to_positional(sql) == ("SELECT $1, $2, $1, '100%'", ("a", "b"))
    assert substitute(sql, lambda n: f":{n}") == "SELECT :a, :b, :a, '100%'"


def test_keys_of_any_type_map_to_dense_numbers():
    ints = KeySpace.of([5, 6, 7], key_is_int=True)
    assert ints.keys is None and (ints.first, ints.last) == (5, 7) and ints.number(6) == 6
    gaps = KeySpace.of([10, 30, 20], key_is_int=True)
    assert gaps.keys == [10, 20, 30] and gaps.number(30) == 3 and gaps.shown(3) == 30  # sorted order
    uuids = ["0b8e-a", "1c9f-b"]
    space = KeySpace.of(uuids, key_is_int=False)
    assert (space.first, space.last) == (1, 2) and space.number("1c9f-b") == 2 and space.shown(1) == "0b8e-a"
    assert space.number("never") == unknown_number("never") < 0
    assert space.shown(unknown_number("never"), {unknown_number("never"): "never"}) == "never"


def test_runs_get_disjoint_key_ranges():
    a, b = key_base("0000002a"), key_base("0000002b")
    assert abs(a - b) >= 2 ** KEY_RANGE_BITS
    assert key_base("ffffffff") + 2 ** KEY_RANGE_BITS < 2 ** 63  # still a bigint
    assert key_base("my-ci-run") == key_base("my-ci-run") != key_base("other-run")


def _log(worker, rows, leases=()):
    log = WorkerLog(worker=worker)
    for job, attempt, claimed, ended, outcome in rows:
        log.record(job, attempt, claimed, ended, outcome)
    log.leases.extend(leases)
    return log


def test_retake_after_the_lease_ended_is_a_redelivery_before_it_a_double_claim():
    # Worker 0's lease ends at server time 100.5; worker 1 re-takes at server time 101 (after).
    first = _log(0, [(1, 1, 1.0, math.nan, 0)], leases=[(0, 100.0, 100.5)])
    second = _log(1, [(1, 2, 2.0, 2.1, DONE)], leases=[(0, 101.0, 101.5)])
    v = judge([first, second], 1, 1, drained=True)
    assert v.redeliveries == 1 and v.double_claimed_jobs == 0 and v.exactly_once
    # Re-taken at server time 100.2, before worker 0's lease ended: a double claim.
    early = _log(1, [(1, 2, 2.0, 2.1, DONE)], leases=[(0, 100.2, 100.7)])
    v = judge([first, early], 1, 1, drained=True)
    assert v.double_claimed_jobs == 1 and not v.exactly_once


def test_completion_after_the_lease_was_retaken_is_stale():
    first = _log(0, [(1, 1, 1.0, 3.0, DONE)], leases=[(0, 100.0, 100.5)])
    second = _log(1, [(1, 2, 2.0, 3.5, STALE)], leases=[(0, 101.0, 101.5)])
    v = judge([first, second], 1, 1, drained=True)
    assert v.stale_completion_violations == 1 and v.violations[0].kind == "stale-completion"
    # Failed (requeued) before the re-take: an ordinary release, nothing stale.
    failed = _log(0, [(1, 1, 1.0, 1.5, FAILED)], leases=[(0, 100.0, 100.5)])
    assert judge([failed, _log(1, [(1, 2, 2.0, 2.5, DONE)], leases=[(0, 101.0, 101.5)])], 1, 1,
                 drained=True).exactly_once


def test_over_claims_and_over_attempts_fail_the_run_with_evidence():
    log = _log(0, [(1, 1, 1.0, 1.0, DONE), (2, 4, 1.0, 1.0, DONE)])
    log.over_claims.append((1.0, 2, [1, 2]))
    log.over_attempts.append((2, 4, 3))
    v = judge([log], 1, 2, drained=True, keys=KeySpace.of(["a", "b"], key_is_int=False))
    assert v.over_claims == 1 and v.over_attempts == 1 and not v.exactly_once
    kinds = {e["kind"]: e for e in v.shape_evidence}
    assert kinds["over-claim"]["jobs"] == ["a", "b"] and kinds["over-attempt"]["job"] == "b"


def _strategy(text: str):
    return strategy_from_file(parse_sql_text(text, Path("f.sql"), HEADER_KEYS), name="f")


def test_own_tables_need_schema_seed_and_remaining():
    with pytest.raises(SqlFileError, match="remaining missing"):
        _strategy("-- name: schema\nCREATE TABLE q (id int);\n-- name: seed\nINSERT INTO q VALUES (1) RETURNING id;\n"
                  "-- name: claim\nSELECT 1;\n")
    s = _strategy("-- name: schema\nCREATE TABLE q (id int);\nCREATE INDEX ON q (id);\n"
                  "-- name: seed\nINSERT INTO q SELECT g FROM generate_series(1, %(jobs)s) g RETURNING id;\n"
                  "-- name: remaining\nSELECT count(*) FROM q;\n"
                  "-- name: pick\nSELECT id, id * 2 AS token FROM q LIMIT %(batch)s;\n"
                  "-- name: claim\nSELECT %(worker)s; DELETE FROM q WHERE id = ANY(%(id)s) AND %(token)s IS NOT NULL RETURNING id;\n"
                  "-- name: after_commit\nSELECT pg_advisory_unlock(%(id)s);\n")
    assert s.own_schema and len(s.steps("schema")) == 2 and len(s.steps("claim")) == 2
