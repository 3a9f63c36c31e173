"""How a worker's records reach the coordinator: deltas over a one-way pipe.

The worker sends what it recorded since its last flush (new claims, and endings of claims it had
already sent) as one :class:`LogDelta`; the coordinator applies each delta to its own copy of the
worker's log. A worker that dies mid-run has sent everything up to its last flush. The same delta
crosses the fork driver's pipe (:class:`PipeSink`) and Locust's messages (pg_claimcheck.locust.claimer,
shifted onto the server's clock first), in the one wire form of :meth:`LogDelta.to_wire`.
"""
from __future__ import annotations

import sys
import time
from array import array
from dataclasses import dataclass, field, fields, replace
from itertools import islice
from typing import Any, Protocol

from pg_claimcheck.verdict.ledger import RECORD_COLUMNS, WorkerLog, record_column
from pg_claimcheck.verdict.observed import WorkerTelemetry

FLUSH_INTERVAL_S = 0.5
"""How often a worker sends its records when nothing needs them sooner. Each send wakes the
coordinator, which takes a core from the workers and the server while it merges: sending every
0.05 s instead, 16 workers on 2 cores used 7-8 us more CPU per job and the coordinator twice its
share of the machine (2.3% against 1.1%), in paired runs of the parity cell."""
PROOF_FLUSH_INTERVAL_S = 0.05
"""In a run that ends at the first proven violation (`check`): the proof reaches the coordinator
within this, so a broken claim fails fast (see WorkerPlan.flush_interval_s)."""
_SWAP = sys.byteorder != "little"
"""The wire carries the columns little-endian, so a Locust worker and its master may differ."""


def _packed(values: array) -> bytes:
    """A column as bytes: msgpack and pickle carry them whole, where a list costs a conversion per value
    at each end. Merging a flush of 1,000 records took the coordinator 240 us from lists, 18 us from
    bytes (the positional tuple of arrays this replaced: 25 us), medians of 2,000 flushes."""
    if _SWAP:
        values = array(values.typecode, values)
        values.byteswap()
    return values.tobytes()


def _unpacked(typecode: str, data: bytes) -> array:
    values = array(typecode)
    values.frombytes(data)
    if _SWAP:
        values.byteswap()
    return values


@dataclass
class LogDelta:
    """What a worker recorded since its last flush: its new records (from slot `start` on), the
    endings of records it had sent already, and its new notes."""

    start: int
    """The slot of the first new record: the number of records the coordinator already has."""
    job: array = record_column("job")
    """The new records' columns, arrays as WorkerLog holds them (see RECORD_COLUMNS)."""
    attempt: array = record_column("attempt")
    claimed_at: array = record_column("claimed_at")
    ended_at: array = record_column("ended_at")
    """NaN: the claim has not ended yet."""
    outcome: array = record_column("outcome")
    endings: list = field(default_factory=list)
    """(slot, ended_at, outcome) of records sent before that ended since."""
    leases: list = field(default_factory=list)
    """WorkerLog's notes, the new ones only (each list only grows, in order)."""
    over_claims: list = field(default_factory=list)
    over_attempts: list = field(default_factory=list)
    unknown_keys: dict = field(default_factory=dict)
    backends: list = field(default_factory=list)

    def __bool__(self) -> bool:
        """Is there anything to send?"""
        return bool(len(self.job) or self.endings or self.leases or self.over_claims or self.over_attempts
                    or self.unknown_keys or self.backends)

    def shifted(self, offset_s: float) -> LogDelta:
        """The same records with every time of this host's monotonic clock moved by `offset_s` (onto
        the server's clock, see pg_claimcheck.locust.claimer.ServerClock). Leases are the server's
        readings already. NaN (not ended yet) stays NaN."""
        return replace(self, claimed_at=array("d", (t + offset_s for t in self.claimed_at)),
                       ended_at=array("d", (t + offset_s for t in self.ended_at)),
                       endings=[(s, t + offset_s, how) for s, t, how in self.endings],
                       over_claims=[(t + offset_s, n, jobs) for t, n, jobs in self.over_claims])

    def to_wire(self) -> dict:
        """Bytes, lists and numbers, as msgpack (Locust's messages) and pickle (the pipe) carry them:
        each column packed (see _packed), unknown keys as pairs, since msgpack maps want string keys."""
        return {"start": self.start, **{name: _packed(getattr(self, name)) for name in RECORD_COLUMNS},
                "endings": [list(e) for e in self.endings], "leases": [list(x) for x in self.leases],
                "over_claims": [[t, n, list(jobs)] for t, n, jobs in self.over_claims],
                "over_attempts": [list(x) for x in self.over_attempts],
                "unknown_keys": [[k, v] for k, v in self.unknown_keys.items()],
                "backends": [list(x) for x in self.backends]}

    @classmethod
    def from_wire(cls, data: dict) -> LogDelta:
        """The other side of :meth:`to_wire`: notes as the worker's log holds them (tuples)."""
        return cls(start=data["start"], **{name: _unpacked(code, data[name]) for name, code in RECORD_COLUMNS.items()},
                   endings=[tuple(e) for e in data["endings"]], leases=[tuple(x) for x in data["leases"]],
                   over_claims=[(t, n, list(jobs)) for t, n, jobs in data["over_claims"]],
                   over_attempts=[tuple(x) for x in data["over_attempts"]],
                   unknown_keys={k: v for k, v in data["unknown_keys"]},
                   backends=[tuple(x) for x in data["backends"]])

    def merge_into(self, log: WorkerLog) -> list[int]:
        """The coordinator's side: apply this delta to its copy of the worker's log. Returns the
        slots of older records that ended in it."""
        if self.start != len(log):  # deltas arrive in order on one pipe; anything else is a harness bug
            raise RuntimeError(f"worker {log.worker}: log delta starts at {self.start}, {len(log)} records known")
        log.job.extend(self.job)
        log.attempt.extend(self.attempt)
        log.claimed_at.extend(self.claimed_at)
        log.ended_at.extend(self.ended_at)
        log.outcome.extend(self.outcome)
        for slot, ended, how in self.endings:
            log.ended_at[slot], log.outcome[slot] = ended, how
        log.backends.extend(self.backends)
        log.leases.extend(self.leases)
        log.over_claims.extend(self.over_claims)
        log.over_attempts.extend(self.over_attempts)
        log.unknown_keys.update(self.unknown_keys)
        return [slot for slot, _, _ in self.endings]


class RecordSink(Protocol):
    """Where a claimer's records go: the fork driver's pipe, or Locust's messages to the master."""

    def send_delta(self, delta: LogDelta) -> None: ...

    def send_end(self, summary: dict) -> None:
        """The claimer's last message (:func:`summary`), after its last delta."""


class PipeSink:
    """A fork driver's worker's end of its one-way pipe; the coordinator reads it with :func:`receive`."""

    def __init__(self, connection: Any) -> None:
        self.connection = connection

    def send_delta(self, delta: LogDelta) -> None:
        self.connection.send(("log", delta.to_wire()))

    def send_end(self, summary: dict) -> None:
        self.connection.send(("end", summary))


def receive(connection: Any) -> LogDelta | dict:
    """The coordinator's end of a PipeSink: the next delta, or the worker's summary (a dict)."""
    kind, payload = connection.recv()
    return LogDelta.from_wire(payload) if kind == "log" else payload


class LogStream:
    """Sends what the worker recorded since the last flush: new claims, and endings of older ones."""

    def __init__(self, sink: RecordSink, log: WorkerLog, interval_s: float) -> None:
        self.sink, self.log, self.interval_s = sink, log, interval_s
        self.sent = 0
        # Leases, over-claims, over-attempts, unknown keys and backends already sent. Each only grows,
        # in order (unknown_keys is a dict: a new key goes to its end), so what is new follows the count.
        self.sent_notes = (0, 0, 0, 0, 0)
        self.ended: set[int] = set()
        self.last_flush = time.monotonic()

    def mark_ended(self, slot: int) -> None:
        if slot < self.sent:
            self.ended.add(slot)

    def delta(self) -> LogDelta:
        """What the coordinator has not been sent yet."""
        log, start = self.log, self.sent
        leases, over, above, unknown, backends = self.sent_notes
        return LogDelta(start=start, job=log.job[start:], attempt=log.attempt[start:],
                        claimed_at=log.claimed_at[start:], ended_at=log.ended_at[start:],
                        outcome=log.outcome[start:],
                        endings=[(s, log.ended_at[s], log.outcome[s]) for s in self.ended],
                        leases=log.leases[leases:], over_claims=log.over_claims[over:],
                        over_attempts=log.over_attempts[above:],
                        unknown_keys=dict(islice(log.unknown_keys.items(), unknown, None)),
                        backends=log.backends[backends:])

    def flush(self) -> None:
        delta, log = self.delta(), self.log
        if delta:
            self.sink.send_delta(delta)
        self.sent, self.last_flush = len(log), time.monotonic()
        self.sent_notes = (len(log.leases), len(log.over_claims), len(log.over_attempts), len(log.unknown_keys),
                           len(log.backends))
        self.ended.clear()

    def flush_if_due(self) -> None:
        if time.monotonic() - self.last_flush >= self.interval_s:
            self.flush()


SUMMARY_FIELDS = tuple(f.name for f in fields(WorkerTelemetry) if f.name != "worker")
"""What a worker sends once, at its end: its telemetry (what it streamed is its log, the ledger's input)."""


def summary(telemetry: WorkerTelemetry) -> dict:
    return {name: getattr(telemetry, name) for name in SUMMARY_FIELDS}


def apply_summary(telemetry: WorkerTelemetry, summary: dict) -> None:
    """The coordinator's side of :func:`summary`."""
    for name, value in summary.items():
        setattr(telemetry, name, value)
