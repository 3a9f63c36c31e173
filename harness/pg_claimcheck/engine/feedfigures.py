"""What a rate run's producers did, as the report shows it: offered and achieved rate, each producer's
lag, the jobs that arrived mid-run, and the pickup and end-to-end latency of the produced jobs.

Latencies are HDR histograms (the `hdrhistogram` package, 3 significant digits, 1 us to 1 h), each
worker's own (pg_claimcheck.engine.producer.ProducerPlan.histograms records them in its process at its
end; for keys learnt at the end, :func:`outcome` records them per worker log here) merged with
`HdrHistogram.add`, never lists of floats sorted at the end.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

from hdrh.histogram import HdrHistogram

from pg_claimcheck.contract.keys import KeySpace, key_of
from pg_claimcheck.engine.wakeup import WAKES
from pg_claimcheck.verdict.ledger import CLAIM_IS_COMPLETION, DONE, WorkerLog
from pg_claimcheck.verdict.observed import ProducerFigures, ProducerOutcome, QueueSamples, WorkerTelemetry
from pg_claimcheck.verdict.result import OverTime
from pg_claimcheck.verdict.timeline import latency_over_time

if TYPE_CHECKING:
    from pg_claimcheck.engine.producer import ProducerLog, ProducerPlan

HISTOGRAM_MAX_US = 3_600_000_000  # an hour, in microseconds
HISTOGRAM_DIGITS = 3


def _histogram() -> HdrHistogram:
    return HdrHistogram(1, HISTOGRAM_MAX_US, HISTOGRAM_DIGITS)


def _summary(h: HdrHistogram) -> dict:
    if h.get_total_count() == 0:
        return {"count": 0, "p50": None, "p95": None, "p99": None, "max": None}
    return {"count": h.get_total_count(), **{f"p{p}": round(h.get_value_at_percentile(p) / 1000, 3)
                                             for p in (50, 95, 99)},
            "max": round(h.get_max_value() / 1000, 3)}


def _record(h: HdrHistogram, seconds: float) -> None:
    h.record_value(max(1, min(HISTOGRAM_MAX_US, round(seconds * 1e6))))


def merged(telemetry: list[WorkerTelemetry]) -> tuple[HdrHistogram, HdrHistogram]:
    """The workers' (pickup, end-to-end) histograms, each recorded in its own process, merged."""
    pickup, end_to_end = _histogram(), _histogram()
    for w in telemetry:
        if w.latency_histograms is not None:
            for into, encoded in zip((pickup, end_to_end), w.latency_histograms):
                into.add(HdrHistogram.decode(encoded))
    return pickup, end_to_end


def committed_keys(plan: ProducerPlan, logs: list[ProducerLog]) -> list:
    """The keys the producers committed, sorted: the keys their enqueues returned (learnt), or producer p's
    first `enqueued` reserved keys of p, p + N, p + 2N, ..."""
    if plan.learns_keys:
        return sorted(key for log in logs for keys in log.keys for key in keys)
    return sorted(plan.first_key + i for p, log in enumerate(logs) for i in plan.jobs_of(p)[:log.enqueued])


def latencies(start: float, rate: float, log: WorkerLog, index_of) -> tuple[HdrHistogram, HdrHistogram]:
    """(pickup, end-to-end) of one worker's claims of produced jobs; index_of(job): its place in the schedule, or None."""
    pickup, end_to_end = _histogram(), _histogram()
    for job, claimed, ended, how in zip(log.job, log.claimed_at, log.ended_at, log.outcome):
        k = index_of(job)
        if k is not None:
            due = start + k / rate
            _record(pickup, claimed - due)
            if how in (DONE, CLAIM_IS_COMPLETION):
                _record(end_to_end, ended - due)
    return pickup, end_to_end


def schedule_start(logs: list[ProducerLog]) -> float:
    """The schedule's start, which every producer that started shares; NaN if none started."""
    return next((log.started_at for log in logs if not math.isnan(log.started_at)), math.nan)


def outcome(plan: ProducerPlan, logs: list[ProducerLog], worker_logs: list[WorkerLog],
            telemetry: list[WorkerTelemetry], keys: KeySpace | None = None) -> ProducerOutcome:
    """The producers' figures from their logs (by index) and the workers' (their logs, and their telemetry's
    histograms and wake-ups). `keys`: the seeded key space the workers numbered their claims in (for learnt keys)."""
    start = schedule_start(logs)
    committed = committed_keys(plan, logs)
    if plan.learns_keys:  # each worker's histograms, recorded here: only the producers' logs know a learnt key's due time
        due = {key: i for p, log in enumerate(logs) for i, made in zip(plan.jobs_of(p), log.keys) for key in made}
        pickup, end_to_end = _histogram(), _histogram()
        for w in worker_logs if not math.isnan(start) else []:
            mine = latencies(start, plan.rate_per_s, w, lambda job: due.get(key_of(keys, job, w.unknown_keys, plan.key_is_int)))
            pickup.add(mine[0])
            end_to_end.add(mine[1])
        produced = lambda job, w: key_of(keys, job, w.unknown_keys, plan.key_is_int) in due  # noqa: E731
    else:
        pickup, end_to_end = merged(telemetry)
        reserved = set(committed)
        produced = lambda job, w: job in reserved  # noqa: E731
    figures = []
    for index, log in enumerate(logs):
        mine = plan.jobs_of(index)
        lags = [at - (start + mine[k] / plan.rate_per_s) for k, at in enumerate(log.committed_at)]
        figures.append(ProducerFigures(producer=index, scheduled=len(mine), enqueued=log.enqueued,
                                       max_lag_ms=max(lags, default=0.0) * 1000))
    enqueued = sum(f.enqueued for f in figures)
    last = max((log.committed_at[-1] for log in logs if log.enqueued), default=-math.inf)
    span = last - start if enqueued else 0.0
    # Achieved: jobs committed over the schedule's span (the first is due at 0, so n jobs span (n-1)/rate on time).
    achieved = (enqueued - 1) / span if enqueued > 1 and span > 0 else float(enqueued)
    # Produced jobs whose first claim committed before the producers' last commit: jobs that arrived mid-run.
    early = {job for w in worker_logs
             for job, claimed in zip(w.job, w.claimed_at) if claimed < last and produced(job, w)}
    return ProducerOutcome(rate_per_s=plan.rate_per_s, duration_s=plan.duration_s, scheduled=plan.scheduled,
                           enqueued=enqueued, achieved_rate_per_s=achieved,
                           max_lag_ms=max((f.max_lag_ms for f in figures), default=0.0),
                           kept_up=all(f.kept_up for f in figures), claimed_before_last_enqueue=len(early),
                           pickup_latency_ms=_summary(pickup), end_to_end_latency_ms=_summary(end_to_end),
                           producers=tuple(figures), committed=committed,
                           wakeups=None if plan.channel is None else
                           {k: sum(w.wakeups.get(k, 0) for w in telemetry) for k in WAKES})


def rate_over_time(logs: list[WorkerLog], origin: float, queue: QueueSamples | None, feed: "ProducerPlan",
                   feed_start: float) -> OverTime | None:
    """A rate run's series from its start (`origin`): the queue sampler's, and the pickup latency per sampling
    interval from each produced job's scheduled time (`feed`'s schedule from `feed_start`). None without samples."""
    if queue is None:
        return None
    return OverTime(queue=queue.series(origin), summary=queue.summary(),
                    latency=latency_over_time(logs, origin, queue.interval_s, lambda job: feed.due_at(feed_start, job)))
