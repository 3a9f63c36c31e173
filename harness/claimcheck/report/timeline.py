"""Claims over time: a compact per-worker histogram of a run, for the HTML report.

Derived after the run from the workers' logs (the hot loop records nothing extra): each
worker's committed claims are counted per time bucket, from the run's start. A run of a
million claims becomes `workers x TIMELINE_BUCKETS` small integers in the JSON.
"""
from __future__ import annotations

from typing import Iterable

from claimcheck.verdict.ledger import WorkerLog

TIMELINE_BUCKETS = 60
"""Buckets per run, whatever its length: enough to see stalls and hand-offs, small in the JSON."""
MIN_BUCKET_S = 0.001


def claims_over_time(logs: Iterable[WorkerLog], origin: float, elapsed_s: float,
                     buckets: int = TIMELINE_BUCKETS) -> dict:
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
