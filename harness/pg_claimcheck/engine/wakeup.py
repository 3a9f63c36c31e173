"""What a worker does after an empty claim while jobs may still come: sleep and poll, or wait for a NOTIFY.

`--wakeup poll` (the default) sleeps `--poll-ms` and claims again: an idle queue costs a claim per
worker per interval, and a job that lands just after an empty claim waits up to an interval.
`--wakeup notify` (with `--rate`, pg_claimcheck.engine.producer) is what LISTEN-driven libraries do:
the producer's enqueue sends `pg_notify` in the job's own transaction (so the notification is
delivered only once the job is visible), and an idle worker waits on its connection for a
notification, or for NOTIFY_FALLBACK_S when none comes (a notification lost to a reconnect must not
strand a job: graphile-worker, procrastinate and pgqueuer poll as a fallback too). Every listener is
woken by every notification, so a job wakes all idle workers and all but one find nothing: the
empty claims say what that costs.

A LISTEN is session state: a worker listens on its connection before its first wait, and again on
the new connection after a reconnect (then claims at once: a job committed in between sent its
notification to nobody). Through a pooler the workers keep no session state, so notify is refused
there (docs/poolers.md).
"""
from __future__ import annotations

import time

import psycopg
from psycopg import sql

from pg_claimcheck.errors import UsageError
from pg_claimcheck.server.topology import Topology

NOTIFY_FALLBACK_S = 1.0
"""A listening worker with no notification claims again after this long (the notify probe's default fallback)."""


WAKES = ("notified", "fallback", "listen")
"""How a listening worker's wait ended: a notification, the fallback timeout, or a LISTEN just issued."""


def channel_name(run_id: str) -> str:
    """The run's own channel: NOTIFY is database-wide, and two runs on one server must not wake each other."""
    return f"claimcheck_{run_id}_feed"


def check_wakeup(strategy, settings, topology: Topology) -> None:
    """`--wakeup notify` (RunSettings checked it comes with --rate) needs the default enqueue, which sends the
    notification, and workers that can LISTEN (Topology.listens: no pooler)."""
    if settings.wakeup != "notify":
        return
    if strategy.own_schema or strategy.has("enqueue"):
        raise UsageError(f"--wakeup notify is for claimcheck's jobs table fed by its default enqueue, which sends "
                         f"the notification in the job's transaction; {strategy.source} brings its own "
                         f"{'tables' if strategy.own_schema else 'enqueue section'}: use --wakeup poll")
    if not topology.listens(worker=True):
        raise UsageError("--wakeup notify needs workers that can LISTEN, and through a pooler they keep no session "
                         "state (a transaction pooler hands each transaction to any backend, which delivers a "
                         "notification to nobody waiting; see docs/poolers.md): use --wakeup poll there")


class Poll:
    """Sleep the poll interval."""

    def __init__(self, poll_ms: float) -> None:
        self.pause_s = poll_ms / 1000
        self.counts: dict[str, int] = {}

    def wait(self, conn: psycopg.Connection) -> None:
        if self.pause_s:
            time.sleep(self.pause_s)


class Listen:
    """Wait for a notification on the run's channel, at most NOTIFY_FALLBACK_S."""

    def __init__(self, channel: str, fallback_s: float = NOTIFY_FALLBACK_S) -> None:
        self.channel, self.fallback_s = channel, fallback_s
        self.listening_on: psycopg.Connection | None = None
        self.counts = dict.fromkeys(WAKES, 0)
        """How each wait ended (WAKES): the worker's log carries it to the report."""

    def wait(self, conn: psycopg.Connection) -> None:
        if conn is not self.listening_on:  # the first wait, or a reconnect's new connection
            conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
            self.listening_on = conn
            self.counts["listen"] += 1
            return  # claim at once: what was enqueued before the LISTEN notified nobody here
        # Notifications that came while the worker was busy wake it at once, all of them together: as a
        # library's listener, one wake-up for what piled up, not one empty claim per stale notification.
        if _take_pending(conn):
            self.counts["notified"] += 1
            return
        for _ in conn.notifies(timeout=self.fallback_s, stop_after=1):
            self.counts["notified"] += 1
            break
        else:
            self.counts["fallback"] += 1
        _take_pending(conn)  # those that came in the same breath


def _take_pending(conn: psycopg.Connection) -> bool:
    """Consume the notifications already received, without waiting; were there any? Those that came during a
    fast-path statement (libpq's own calls) wait in libpq's queue, where psycopg's notifies() does not look."""
    found = False
    while conn.pgconn.notifies() is not None:
        found = True
    for _ in conn.notifies(timeout=0):  # psycopg's backlog, and what the socket holds now
        found = True
    return found


def waiter(settings, channel: str | None) -> Poll | Listen:
    """The empty-claim wait of a run's workers."""
    return Listen(channel) if settings.wakeup == "notify" else Poll(settings.poll_ms)
