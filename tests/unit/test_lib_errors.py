"""A library's error says what the server said (issue 35, item 8)."""
from __future__ import annotations

import contextlib
from types import SimpleNamespace

import psycopg
import pytest

from pg_claimcheck.libs import feed


def test_the_producers_wrapped_serialization_failure_is_named(monkeypatch):
    # Under a SERIALIZABLE default role the procrastinate producer ended "ConnectorException: ⏎ Database
    # error. ⏎ ;", where graphile-worker in the same place names the serialization failure.
    exceptions = pytest.importorskip("procrastinate.exceptions", reason="procrastinate is an optional extra")

    class Producer:
        name = "procrastinate"

        @contextlib.asynccontextmanager
        async def feeder(self, dsn):
            try:
                raise psycopg.errors.SerializationFailure("could not serialize access due to concurrent update")
            except psycopg.Error as exc:
                raise exceptions.ConnectorException() from exc
            yield  # pragma: no cover

    sent = []
    monkeypatch.setattr(feed.children, "child_process_setup", lambda: None)
    sender = SimpleNamespace(send=sent.append, close=lambda: None)
    feed.feed_main(Producer(), "", None, None, SimpleNamespace(value=1), None, sender)
    assert sent[0].error == ("the procrastinate producer failed: ConnectorException: Database error. (from "
                             "SerializationFailure [40001]: could not serialize access due to concurrent update)")
