"""The claim's other columns reach complete / fail / extend / after_commit by name (docs/contracts.md,
section 1): accepted at load when the claim's text names them, refused at validation when the claim
does not return them, and bound per job, on the fast path as on psycopg's."""
import datetime
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from pg_claimcheck.contract.sqlfile import parse_sql_text
from pg_claimcheck.contract.strategy import (
    DEFAULT_SHAPE,
    HEADER_KEYS,
    carried_columns,
    load_strategy,
    strategy_from_file,
)
from pg_claimcheck.engine.backend import Carried, Keys, as_text
from pg_claimcheck.engine.fastpath import Binder, LibpqBackend
from pg_claimcheck.errors import SqlFileError

EXAMPLE = Path(__file__).parents[1] / "examples" / "claim_token_fence.sql"
CLAIM = ("-- name: claim\nUPDATE jobs SET status = 'running', token = gen_random_uuid()\n"
         "WHERE id = 1 RETURNING id, attempts, token;\n")


def strategy(text: str):
    return strategy_from_file(parse_sql_text(text, Path("q.sql"), HEADER_KEYS), name="q")


def test_a_column_the_claim_names_is_accepted_at_load_and_carried_by_its_place():
    s = load_strategy(str(EXAMPLE))
    assert carried_columns(s, ("id", "read_ct", "lease_until", "claim_token")) == (("claim_token", 3),)


def test_a_name_the_claim_never_mentions_is_refused_at_load_with_its_line():
    with pytest.raises(SqlFileError, match=r"q.sql:6: section 'complete' uses unknown parameter\(s\) %\(tokn\)s; "
                                           r".*and any column the claim returns"):
        strategy(CLAIM + "-- name: complete\nUPDATE jobs SET status = 'done'\nWHERE token = %(tokn)s")


def test_a_name_the_claim_does_not_return_is_refused_with_its_section_line():
    s = strategy(CLAIM + "-- name: fail\nUPDATE jobs SET status = 'queued'\nWHERE id = %(id)s AND status = %(status)s")
    with pytest.raises(SqlFileError, match=r"q.sql:5: section 'fail' uses %\(status\)s, which is neither a "
                                           r"parameter of 'fail' nor a column the claim returns \(id, attempts, token\)"):
        carried_columns(s, ("id", "attempts", "token"))


def test_each_job_is_bound_with_the_values_its_own_claim_row_returned():
    token, at = uuid.uuid4(), datetime.datetime(2026, 12, 2, 7, 0, 0, 123456, tzinfo=datetime.timezone.utc)
    shape = DEFAULT_SHAPE.__class__(**{**DEFAULT_SHAPE.__dict__, "columns": ("id", "attempts", "token", "at"),
                                       "carried": (("token", 2), ("at", 3))})
    plan = SimpleNamespace(shape=shape, keys=None)
    carried = Carried(plan)
    carried.keep([(7, 1, token, at), (9, 2, None, at)])
    assert carried.of(7) == {"token": token, "at": at}
    assert carried.of(9) == {"token": None, "at": at}
    assert carried.of(8) == {"token": None, "at": None}  # no claim of ours: NULL, which fences nothing in

    backend = LibpqBackend.__new__(LibpqBackend)  # the fast path's binding, without a connection
    backend.carried, backend.keys = carried, Keys(plan, {})
    backend.bind_complete = Binder(("id", "token", "worker", "at"), {"worker": "w01"},
                                   {"id": 0, "attempts": 1, "token": 2, "at": 3}, 4)
    assert backend.bind_complete(backend._carrying([(7, 1), (9, 2)])) == [
        (b"7", str(token).encode(), b"w01", b"2026-12-02 07:00:00.123456+00:00"),
        (b"9", None, b"w01", b"2026-12-02 07:00:00.123456+00:00"),
    ]
    assert as_text(True) == b"true" and as_text(None) is None
