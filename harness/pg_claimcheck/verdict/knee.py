"""Each strategy's knee in a `bench --rate` sweep: the highest offered rate it sustains (docs/producers.md).

A rate run *sustains* its offered rate when all of these hold (:func:`shortfalls` names each that
does not): exactly-once held (no double claim, no job lost after the drain); the run drained; the
producer kept up with its schedule (every scheduled job enqueued, none more than LAG_LIMIT_S late);
it achieved at least SUSTAINED_SHARE of the offered rate; and the pickup latency's p99 (from each
produced job's scheduled enqueue time to its claim's commit) is at most the SLO. A setting's knee
is the highest swept rate that it and every lower swept rate sustained: a sweep reads from low to
high and stops believing at the first rate that fell over, so a lucky run above a failed one does
not raise the knee. None when the lowest rate already fell over.

Pure functions of the run results; the verdict of each run stays the ledger's.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pg_claimcheck.settings import StopReason
from pg_claimcheck.verdict.result import RunResult

DEFAULT_LATENCY_SLO_MS = 100.0
SUSTAINED_SHARE = 0.95
"""The share of the offered rate a run must achieve to sustain it."""


def shortfalls(run: RunResult, slo_ms: float) -> list[str]:
    """Why a rate run did not sustain its offered rate, one phrase each; empty when it did."""
    p = run.producer
    if p is None:
        return ["not a rate run"]
    reasons = [] if run.exactly_once else ["exactly-once violated"]
    if run.stopped_by != StopReason.DRAINED:
        reasons.append(f"did not drain ({run.stopped_by})")
    if not p.kept_up:
        reasons.append(f"producer fell behind (max lag {p.max_lag_ms:,.0f} ms, {p.enqueued:,} of {p.scheduled:,} "
                       "enqueued)")
    if p.achieved_rate_per_s < SUSTAINED_SHARE * p.rate_per_s:
        reasons.append(f"achieved {p.achieved_rate_per_s:,.0f} jobs/s, under {SUSTAINED_SHARE:.0%} of offered")
    p99 = p.pickup_latency_ms.get("p99")
    if p99 is None:
        reasons.append("no pickup latency recorded")
    elif p99 > slo_ms:
        reasons.append(f"pickup p99 {p99:,.1f} ms > SLO {slo_ms:g} ms")
    return reasons


@dataclass(frozen=True)
class RatePoint:
    """One rate of a setting's sweep."""

    rate_per_s: float
    achieved_rate_per_s: float
    pickup_p99_ms: float | None
    shortfalls: tuple[str, ...]
    """Why it was not sustained (see :func:`shortfalls`); empty when it was."""

    @property
    def sustained(self) -> bool:
        return not self.shortfalls

    def as_dict(self) -> dict[str, Any]:
        return {"offered_rate_per_s": self.rate_per_s, "achieved_rate_per_s": round(self.achieved_rate_per_s, 3),
                "pickup_p99_ms": self.pickup_p99_ms, "sustained": self.sustained, "shortfalls": list(self.shortfalls)}


@dataclass(frozen=True)
class Knee:
    """One strategy x setting's sweep over the offered rates, and its knee."""

    strategy: str
    mode: str
    workers: int
    batch: int
    slo_ms: float
    points: tuple[RatePoint, ...]
    """Each swept rate, ascending."""

    @property
    def rate_per_s(self) -> float | None:
        """The highest swept rate that it and every lower one sustained; None if the lowest did not."""
        knee = None
        for point in self.points:
            if not point.sustained:
                break
            knee = point.rate_per_s
        return knee

    @property
    def first_unsustained(self) -> RatePoint | None:
        """The lowest swept rate not sustained: where the sweep stopped believing. None if every one held."""
        return next((p for p in self.points if not p.sustained), None)

    @property
    def summary(self) -> str:
        """The knee in words: `1,000 jobs/s`, `≥ 2,000 jobs/s (every rate swept)`, `below 200 jobs/s`."""
        if self.rate_per_s is None:
            return f"below {self.points[0].rate_per_s:,g} jobs/s"
        if self.first_unsustained is None:
            return f"≥ {self.rate_per_s:,g} jobs/s (every rate swept held)"
        return f"{self.rate_per_s:,g} jobs/s"

    def as_dict(self) -> dict[str, Any]:
        first = self.first_unsustained
        return {"strategy": self.strategy, "mode": self.mode, "workers": self.workers, "batch": self.batch,
                "latency_slo_ms": self.slo_ms, "knee_rate_per_s": self.rate_per_s,
                "knee_bounded": first is not None, "summary": self.summary,
                "first_unsustained_rate_per_s": None if first is None else first.rate_per_s,
                "rates": [p.as_dict() for p in self.points]}


def knees(runs: list[RunResult], slo_ms: float) -> list[Knee]:
    """One knee per strategy x mode x workers x batch among the rate runs, in the order first run."""
    groups: dict[tuple[Any, ...], list[RunResult]] = {}
    for run in runs:
        if run.producer is not None:
            s = run.settings
            groups.setdefault((run.strategy.name, s.mode, s.workers, s.batch), []).append(run)
    out = []
    for (name, mode, workers, batch), rs in groups.items():
        fed = sorted(((r, r.producer) for r in rs if r.producer is not None), key=lambda pair: pair[1].rate_per_s)
        points = tuple(RatePoint(rate_per_s=p.rate_per_s, achieved_rate_per_s=p.achieved_rate_per_s,
                                 pickup_p99_ms=p.pickup_latency_ms.get("p99"), shortfalls=tuple(shortfalls(r, slo_ms)))
                       for r, p in fed)
        out.append(Knee(strategy=name, mode=mode, workers=workers, batch=batch, slo_ms=slo_ms, points=points))
    return out
