"""Claims and latency over time: compact series of a run, for the JSON and the HTML report.

Derived after the run from the workers' logs (the hot loop records nothing extra): each
worker's committed claims are counted per time bucket, from the run's start. A run of a
million claims becomes `workers x TIMELINE_BUCKETS` small integers in the JSON. In a rate run,
the pickup latency of the claims committed in each interval (:func:`latency_over_time`).
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

from pg_claimcheck.verdict.ledger import WorkerLog
from pg_claimcheck.verdict.stats import percentile

TIMELINE_BUCKETS = 60
"""Buckets per run, whatever its length: enough to see stalls and hand-offs, small in the JSON."""
MIN_BUCKET_S = 0.001


def claims_over_time(logs: Iterable[WorkerLog], origin: float, elapsed_s: float,
                     buckets: int = TIMELINE_BUCKETS) -> dict[str, Any]:
    """`{"bucket_s": width, "workers": {"w00": [claims per bucket, ...], ...}}`.

    Times are `time.monotonic()` readings like `origin`; a claim at or past the end lands in
    the last bucket (the end is the last worker's own clock, read a moment after its last claim).
    """
    width = max(elapsed_s / buckets, MIN_BUCKET_S)
    workers: dict[str, list[int]] = {}
    for log in logs:
        counts = [0] * buckets
        for at in log.claimed_at:
            slot = int((at - origin) / width)
            counts[min(max(slot, 0), buckets - 1)] += 1
        workers[f"w{log.worker:02d}"] = counts
    return {"bucket_s": round(width, 6), "workers": workers}


def latency_over_time(logs: Iterable[WorkerLog], origin: float, bucket_s: float,
                      due: Callable[[object], float | None]) -> dict[str, Any]:
    """A rate run's pickup latency per interval: `{"bucket_s", "t_s", "count", "p50", "p99", "max"}`, one
    entry per interval of `bucket_s` seconds from `origin` (the run's start) to the last claim of a produced job.

    Each claim of a produced job (`due(job)` its scheduled enqueue time, None for a seeded job) counts in
    the interval its commit fell in, with its latency from the schedule to that commit; an interval's
    percentiles are the nearest-rank ones of its claims (p99: the value below which 99 % of them are),
    null where no claim committed. The run's own p50/p99 are its HDR histograms' (pg_claimcheck.engine.producer).
    """
    width = max(bucket_s, MIN_BUCKET_S)
    buckets: dict[int, list[float]] = {}
    for log in logs:
        for job, claimed in zip(log.job, log.claimed_at):
            scheduled = due(job)
            if scheduled is not None:
                buckets.setdefault(max(0, int((claimed - origin) / width)), []).append((claimed - scheduled) * 1000)
    slots = range(max(buckets, default=-1) + 1)
    ranked = {slot: sorted(values) for slot, values in buckets.items()}
    return {"bucket_s": round(width, 6), "t_s": [round(slot * width, 3) for slot in slots],
            "count": [len(ranked.get(slot, ())) for slot in slots],
            **{name: [round(percentile(ranked[slot], q), 3) if slot in ranked else None for slot in slots]
               for name, q in (("p50", 50), ("p99", 99))},
            "max": [round(ranked[slot][-1], 3) if slot in ranked else None for slot in slots]}
