"""Wake-up latency: a LISTEN-driven worker against polling workers, from enqueue commit to claim.

A producer enqueues jobs one per transaction at random gaps; one worker claims them. The
LISTEN worker claims until the queue is empty, then waits for a notification, with a fallback
poll when none comes (a notification missed while reconnecting must not strand a job). A
polling worker claims, and sleeps its interval after an empty claim. Besides latency, each
variant reports the claim queries it ran: that is what polling costs an idle queue.
"""
from __future__ import annotations

import random
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass, field

import psycopg

from pg_claimcheck.contract.strategy import Strategy
from pg_claimcheck.probes import PROBE_QUERIES
from pg_claimcheck.probes._work import claim, complete, connect
from pg_claimcheck.probes.notify import channel_name, install_trigger, listen
from pg_claimcheck.server.runcontext import RunContext
from pg_claimcheck.verdict.stats import latency_summary

GAP_MS = (20.0, 80.0)  # between enqueues: uniform, so jobs arrive at random points of a poll cycle
RNG_SEED = 3  # the same arrival pattern for every variant
DRAIN_TIMEOUT_S = 30.0  # a variant that has not claimed every job by then is reported as such
JOIN_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Variant:
    """How the worker waits: LISTEN with a fallback poll, or a poll interval."""

    kind: str
    """`listen` or `poll`."""
    interval_ms: float
    """The poll interval, or the LISTEN worker's fallback poll."""

    @property
    def label(self) -> str:
        if self.kind == "listen":
            return f"LISTEN + fallback poll {self.interval_ms:g} ms"
        return f"poll every {self.interval_ms:g} ms"


@dataclass
class WakeResult:
    variant: Variant
    enqueued: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    claim_queries: int = 0
    empty_claims: int = 0
    woken_by: dict[str, int] = field(default_factory=lambda: {"notify": 0, "fallback": 0, "poll": 0})
    """Jobs claimed after each kind of wake-up."""
    elapsed_s: float = 0.0

    @property
    def claimed(self) -> int:
        return len(self.latencies_ms)

    def summary(self) -> dict:
        return latency_summary(self.latencies_ms)

    def as_dict(self) -> dict:
        return {"variant": self.variant.label, "kind": self.variant.kind, "interval_ms": self.variant.interval_ms,
                "enqueued": self.enqueued, "claimed": self.claimed, "latency_ms": self.summary(),
                "claim_queries": self.claim_queries, "empty_claims": self.empty_claims,
                "claimed_after": self.woken_by, "elapsed_s": round(self.elapsed_s, 3)}


class _Shared:
    """Enqueue times by job id (producer) and the consumer's record, under one lock."""

    def __init__(self, result: WakeResult) -> None:
        self.lock = threading.Lock()
        self.enqueued_at: dict[int, float] = {}
        self.result = result
        self.producer_done = threading.Event()
        self.stop = threading.Event()
        self.errors: list[BaseException] = []

    def claimed(self, ids: list[int], at: float, woken_by: str) -> None:
        with self.lock:
            for job in ids:
                self.result.latencies_ms.append((at - self.enqueued_at[job]) * 1000)
            self.result.woken_by[woken_by] += len(ids)

    def all_claimed(self) -> bool:
        with self.lock:
            return self.producer_done.is_set() and self.result.claimed >= len(self.enqueued_at)


def _produce(conn: psycopg.Connection, shared: _Shared, enqueues: int) -> None:
    rng = random.Random(RNG_SEED)
    try:
        for n in range(enqueues):
            if shared.stop.wait(rng.uniform(*GAP_MS) / 1000):
                break
            with conn.transaction():
                job = conn.execute(PROBE_QUERIES["enqueue_one"], {"n": n, "queue": "default"}).fetchone()[0]
                # Taken just before COMMIT: latency is an upper bound by the commit's own few µs.
                with shared.lock:
                    shared.enqueued_at[job] = time.monotonic()
            shared.result.enqueued += 1
    except BaseException as exc:
        shared.errors.append(exc)
        shared.stop.set()
    finally:
        shared.producer_done.set()


def _drain(conn: psycopg.Connection, strategy: Strategy, shared: _Shared, woken_by: str) -> None:
    """Claim until a claim comes back empty."""
    while not shared.stop.is_set():
        claimed = claim(conn, strategy, "wakeup-worker")
        at = time.monotonic()
        shared.result.claim_queries += 1
        if not claimed:
            shared.result.empty_claims += 1
            return
        shared.claimed([c.id for c in claimed], at, woken_by)
        complete(conn, strategy, "wakeup-worker", claimed)


def _consume(conn: psycopg.Connection, listener: psycopg.Connection | None, strategy: Strategy,
             shared: _Shared, variant: Variant) -> None:
    interval_s = variant.interval_ms / 1000
    woken_by = "poll" if listener is None else "fallback"  # the first drain finds what came before
    try:
        while not shared.stop.is_set() and not shared.all_claimed():
            _drain(conn, strategy, shared, woken_by)
            if listener is None:
                shared.stop.wait(interval_s)
            else:
                got = list(listener.notifies(timeout=interval_s, stop_after=1))
                woken_by = "notify" if got else "fallback"
    except BaseException as exc:
        shared.errors.append(exc)
        shared.stop.set()


def run_variant(run: RunContext, strategy: Strategy, variant: Variant,
                enqueues: int) -> WakeResult:
    result = WakeResult(variant)
    shared = _Shared(result)
    with ExitStack() as stack:
        producer = connect(run, "wakeup-producer", stack, worker=True)
        worker = connect(run, "wakeup-worker", stack, worker=True)
        listener = None
        if variant.kind == "listen":
            listener = connect(run, "wakeup-listener", stack, worker=True)
            listen(listener, channel_name(run.run_id))
        threads = [threading.Thread(target=_produce, args=(producer, shared, enqueues), daemon=True),
                   threading.Thread(target=_consume, args=(worker, listener, strategy, shared, variant), daemon=True)]
        started = time.monotonic()
        try:
            for t in threads:
                t.start()
            deadline = started + DRAIN_TIMEOUT_S + enqueues * GAP_MS[1] / 1000
            while not shared.stop.is_set() and not shared.all_claimed() and time.monotonic() < deadline:
                time.sleep(0.01)
        finally:
            shared.stop.set()
            for t in threads:
                t.join(JOIN_TIMEOUT_S)
        result.elapsed_s = time.monotonic() - started
    if shared.errors:
        raise shared.errors[0]
    return result


def run_wakeup(coordinator: psycopg.Connection, run: RunContext, strategy: Strategy,
               variants: list[Variant], enqueues: int) -> list[WakeResult]:
    """Each variant on a fresh, empty `jobs` table with the notify trigger."""
    results = []
    for variant in variants:
        install_trigger(coordinator, run.schema, channel_name(run.run_id))
        results.append(run_variant(run, strategy, variant, enqueues))
    return results
