"""LISTEN/NOTIFY as seed 003 describes it, measured on real connections.

Three properties from the NOTIFY reference, each shown rather than quoted: delivery happens at
commit (a listener checking in between sees nothing); identical notifications in one
transaction fold into one; a payload must be shorter than 8000 bytes. Seed 003's AFTER INSERT
trigger is created in the run's schema and notifies a channel named after the run, so probes
sharing a server do not hear each other. The wake-up latency comparison is in `wakeup`.
"""
from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import dataclass, field

import psycopg
from psycopg import sql

from pg_claimcheck.probes import PROBE_QUERIES
from pg_claimcheck.probes._work import connect
from pg_claimcheck.server.runcontext import RunContext
from pg_claimcheck.server.schema import build_jobs_table

LISTENER_CHECKS = 3  # looks the listener takes while the producer's transaction is open
CHECK_WAIT_S = 0.3  # each look waits this long for a notification
DELIVERY_TIMEOUT_S = 5.0  # after commit: give up waiting (a failure, shown as such)
PAYLOAD_LIMIT_BYTES = 8000  # default build: the payload must be shorter than this
FOLD_COPIES = 3


def channel_name(run_id: str) -> str:
    return f"claimcheck_{run_id}_jobs"


def install_trigger(conn: psycopg.Connection, schema: str, channel: str) -> None:
    """An empty `jobs` table with seed 003's notify trigger, all inside the run's schema."""
    build_jobs_table(conn, schema, 0)
    function = sql.Identifier(schema, "jobs_notify")
    conn.execute(sql.SQL(PROBE_QUERIES["notify_function"]).format(function=function))
    conn.execute(sql.SQL(PROBE_QUERIES["notify_trigger"]).format(function=function, channel=sql.Literal(channel)))


def listen(conn: psycopg.Connection, channel: str) -> None:
    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))


@dataclass(frozen=True)
class Event:
    """One line of the delivery timeline."""

    wall: float
    """time.time() when it happened (printed as UTC HH:MM:SS.mmm)."""
    offset_ms: float
    """Milliseconds since the producer's insert."""
    who: str
    what: str
    seen: int | None = None
    """For a listener check: notifications it received."""

    def as_dict(self) -> dict:
        return {"at": time.strftime("%H:%M:%S", time.gmtime(self.wall)) + f".{int(self.wall * 1000) % 1000:03d}",
                "offset_ms": round(self.offset_ms, 3), "who": self.who, "what": self.what, "seen": self.seen}


@dataclass
class Delivery:
    """Delivery at commit: nothing before, the notification right after."""

    events: list[Event] = field(default_factory=list)
    seen_before_commit: int = 0
    after_commit_ms: float | None = None
    """From the commit returning to the listener holding the notification (None: never came)."""
    listen_backend: int | None = None
    """Through a pooler: the backend that ran the LISTEN (the pooler hands it to others afterwards)."""

    @property
    def holds(self) -> bool:
        return self.seen_before_commit == 0 and self.after_commit_ms is not None

    def as_dict(self) -> dict:
        return {"holds": self.holds, "seen_before_commit": self.seen_before_commit,
                "after_commit_ms": None if self.after_commit_ms is None else round(self.after_commit_ms, 3),
                "listen_backend": self.listen_backend,
                "timeline": [e.as_dict() for e in self.events]}


def delivery_at_commit(producer: psycopg.Connection, listener: psycopg.Connection) -> Delivery:
    result = Delivery(listen_backend=getattr(listener, "backend_pid", None))
    started = time.monotonic()

    def note(who: str, what: str, seen: int | None = None) -> None:
        result.events.append(Event(time.time(), (time.monotonic() - started) * 1000, who, what, seen))

    with producer.transaction():
        job = producer.execute(PROBE_QUERIES["enqueue_one"], {"n": 0, "queue": "default"}).fetchone()[0]
        note("producer", f"BEGIN; INSERT job {job} (the trigger calls pg_notify); not committed")
        for _ in range(LISTENER_CHECKS):
            seen = len(list(listener.notifies(timeout=CHECK_WAIT_S, stop_after=1)))
            result.seen_before_commit += seen
            note("listener", f"checks for {CHECK_WAIT_S * 1000:.0f} ms: " + ("a notification!" if seen else "nothing"),
                 seen)
    committed = time.monotonic()
    note("producer", "COMMIT")
    got = list(listener.notifies(timeout=DELIVERY_TIMEOUT_S, stop_after=1))
    if got:
        result.after_commit_ms = (time.monotonic() - committed) * 1000
        note("listener", f"receives the notification: payload {got[0].payload!r}, from pid {got[0].pid}", len(got))
    elif result.listen_backend is not None:
        note("listener", f"nothing within {DELIVERY_TIMEOUT_S:g}s of the commit: the LISTEN ran on backend "
             f"{result.listen_backend}, which the pooler gave back to its pool when that transaction ended; this "
             "connection listens nowhere now (the LISTEN is lost)", 0)
    else:
        note("listener", f"nothing within {DELIVERY_TIMEOUT_S:g}s of the commit", 0)
    return result


@dataclass(frozen=True)
class Folding:
    """One folding case: what the producer sent and what the listener got."""

    case: str
    sent: list[str]
    received: list[str]
    one_transaction: bool

    @property
    def holds(self) -> bool:
        """Identical payloads of one transaction arrive once; everything else arrives as sent."""
        expected = list(dict.fromkeys(self.sent)) if self.one_transaction else self.sent
        return self.received == expected

    def as_dict(self) -> dict:
        return {"case": self.case, "sent": self.sent, "received": self.received, "holds": self.holds}


def _collect_until(listener: psycopg.Connection, sentinel: str) -> list[str]:
    """Notifications up to `sentinel`, sent after the case by the same producer: one session's
    notifications arrive in commit order, so no fixed wait is needed to know the case is over."""
    received: list[str] = []
    for notify in listener.notifies(timeout=DELIVERY_TIMEOUT_S):
        if notify.payload == sentinel:
            return received
        received.append(notify.payload)
    return received


def folding(producer: psycopg.Connection, listener: psycopg.Connection, channel: str) -> list[Folding]:
    same = ["default"] * FOLD_COPIES
    distinct = [f"queue-{i}" for i in range(1, FOLD_COPIES + 1)]
    cases = (("same queue, one transaction", [same]), ("distinct queues, one transaction", [distinct]),
             ("same queue, one transaction each", [[q] for q in same]))
    results = []
    for number, (case, transactions) in enumerate(cases):
        for queues in transactions:
            with producer.transaction():
                for n, queue in enumerate(queues):
                    producer.execute(PROBE_QUERIES["enqueue_one"], {"n": n, "queue": queue})
        sentinel = f"end-of-case-{number}"
        producer.execute(PROBE_QUERIES["notify"], {"channel": channel, "payload": sentinel})
        sent = [q for queues in transactions for q in queues]
        results.append(Folding(f"{len(sent)} inserts, {case}", sent, _collect_until(listener, sentinel),
                               one_transaction=len(transactions) == 1))
    return results


@dataclass(frozen=True)
class PayloadLimit:
    """pg_notify at the limit: the largest accepted payload and the server's refusal."""

    accepted_bytes: int | None
    rejected_bytes: int
    sqlstate: str | None
    message: str | None
    """The server's message for the rejected payload (None if it was accepted)."""

    def as_dict(self) -> dict:
        return {"accepted_bytes": self.accepted_bytes, "rejected_bytes": self.rejected_bytes,
                "sqlstate": self.sqlstate, "message": self.message}


def _try_payload(producer: psycopg.Connection, channel: str, size: int) -> psycopg.Error | None:
    try:
        # Rolled back: only the error matters, and the listener must not get 8 kB of 'x'.
        with producer.transaction(force_rollback=True):
            producer.execute(PROBE_QUERIES["notify"], {"channel": channel, "payload": "x" * size})
    except psycopg.Error as exc:
        return exc
    return None


def payload_limit(producer: psycopg.Connection, channel: str) -> PayloadLimit:
    below = _try_payload(producer, channel, PAYLOAD_LIMIT_BYTES - 1)
    at = _try_payload(producer, channel, PAYLOAD_LIMIT_BYTES)
    return PayloadLimit(PAYLOAD_LIMIT_BYTES - 1 if below is None else None, PAYLOAD_LIMIT_BYTES,
                        at.sqlstate if at else None, (at.diag.message_primary or str(at)).strip() if at else None)


@dataclass(frozen=True)
class NotifyFacts:
    delivery: Delivery
    folding: list[Folding]
    payload: PayloadLimit

    @property
    def holds(self) -> bool:
        return self.delivery.holds and all(f.holds for f in self.folding) and self.payload.message is not None

    def as_dict(self) -> dict:
        return {"delivery_at_commit": self.delivery.as_dict(), "folding": [f.as_dict() for f in self.folding],
                "payload_limit": self.payload.as_dict()}


def notify_facts(coordinator: psycopg.Connection, run: RunContext) -> NotifyFacts:
    """The three properties, on a fresh `jobs` table with the trigger; connections closed on the way out."""
    channel = channel_name(run.run_id)
    install_trigger(coordinator, run.schema, channel)
    with ExitStack() as stack:
        listener = connect(run, "notify-listener", stack, worker=True)
        producer = connect(run, "notify-producer", stack, worker=True)
        listen(listener, channel)
        delivery = delivery_at_commit(producer, listener)
        # A LISTEN lost behind a pooler hears nothing more: folding would only wait out its timeouts.
        folded = folding(producer, listener, channel) if delivery.after_commit_ms is not None else []
        limit = payload_limit(producer, channel)
    return NotifyFacts(delivery, folded, limit)
