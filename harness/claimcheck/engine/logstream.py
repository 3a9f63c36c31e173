"""How a worker's records reach the coordinator: deltas over a one-way pipe.

The worker sends what it recorded since its last flush (new claims, and endings of claims it had
already sent); the coordinator applies each delta to its own copy of the worker's log. A worker
that dies mid-run has sent everything up to its last flush.
"""
from __future__ import annotations

import time
from itertools import islice
from typing import Any

from claimcheck.verdict.ledger import WorkerLog

FLUSH_INTERVAL_S = 0.5
"""How often a worker sends its records when nothing needs them sooner. Each send wakes the
coordinator, which takes a core from the workers and the server while it merges: sending every
0.05 s instead, 16 workers on 2 cores used 7-8 us more CPU per job and the coordinator twice its
share of the machine (2.3% against 1.1%), in paired runs of the parity cell."""
PROOF_FLUSH_INTERVAL_S = 0.05
"""In a run that ends at the first proven violation (`check`): the proof reaches the coordinator
within this, so a broken claim fails fast (see WorkerPlan.flush_interval_s)."""


class LogStream:
    """Sends what the worker recorded since the last flush: new claims, and endings of older ones."""

    def __init__(self, pipe: Any, log: WorkerLog, interval_s: float) -> None:
        self.pipe, self.log, self.interval_s = pipe, log, interval_s
        self.sent = 0
        # Leases, over-claims, over-attempts, unknown keys and backends already sent. Each only grows,
        # in order (unknown_keys is a dict: a new key goes to its end), so what is new follows the count.
        self.sent_notes = (0, 0, 0, 0, 0)
        self.ended: set[int] = set()
        self.last_flush = time.monotonic()

    def mark_ended(self, slot: int) -> None:
        if slot < self.sent:
            self.ended.add(slot)

    def flush(self) -> None:
        log, start = self.log, self.sent
        endings = [(s, log.ended_at[s], log.outcome[s]) for s in self.ended]
        leases, over, above, unknown, backends = self.sent_notes
        notes = (log.leases[leases:], log.over_claims[over:], log.over_attempts[above:],
                 dict(islice(log.unknown_keys.items(), unknown, None)), log.backends[backends:])
        if len(log) > start or endings or any(notes):
            self.pipe.send(("log", (start, log.job[start:], log.attempt[start:], log.claimed_at[start:],
                                    log.ended_at[start:], log.outcome[start:], endings, notes)))
        self.sent, self.last_flush = len(log), time.monotonic()
        self.sent_notes = (len(log.leases), len(log.over_claims), len(log.over_attempts), len(log.unknown_keys),
                           len(log.backends))
        self.ended.clear()

    def flush_if_due(self) -> None:
        if time.monotonic() - self.last_flush >= self.interval_s:
            self.flush()


SUMMARY_FIELDS = ("claim_latency_ms", "claim_statements", "empty_claims", "serialization_failures", "deadlocks",
                  "reconnects", "sqlstates", "started_at", "finished_at", "cpu_s", "error", "drained",
                  "latency_histograms", "wakeups")
"""What a worker sends once, at its end: everything in its log but what it streamed (its claims
and their notes)."""


def summary(log: WorkerLog) -> dict:
    return {name: getattr(log, name) for name in SUMMARY_FIELDS}


def apply_summary(log: WorkerLog, fields: dict) -> None:
    """The coordinator's side of :func:`summary`."""
    for name, value in fields.items():
        setattr(log, name, value)


def merge_delta(log: WorkerLog, payload: tuple) -> list[int]:
    """The coordinator's side of :class:`LogStream`: apply one flush to its copy of the log.
    Returns the slots of older records that ended in it."""
    start, job, attempt, claimed_at, ended_at, outcome, endings, notes = payload
    if start != len(log):  # messages arrive in order on one pipe; anything else is a harness bug
        raise RuntimeError(f"worker {log.worker}: log delta starts at {start}, {len(log)} records known")
    log.job.extend(job)
    log.attempt.extend(attempt)
    log.claimed_at.extend(claimed_at)
    log.ended_at.extend(ended_at)
    log.outcome.extend(outcome)
    for slot, ended, how in endings:
        log.ended_at[slot], log.outcome[slot] = ended, how
    leases, over_claims, over_attempts, unknown, backends = notes
    log.backends.extend(backends)
    log.leases.extend(leases)
    log.over_claims.extend(over_claims)
    log.over_attempts.extend(over_attempts)
    log.unknown_keys.update(unknown)
    return [slot for slot, _, _ in endings]
