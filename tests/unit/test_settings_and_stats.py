import random

import pytest

from claimcheck.errors import UsageError
from claimcheck.settings import RunSettings, WorkTime
from claimcheck.verdict.stats import latency_summary, percentile


@pytest.mark.parametrize("field,value,message", [
    ("workers", 0, "--workers must be between 1 and 64"),
    ("workers", 65, "--workers must be between 1 and 64"),
    ("jobs", 0, "--jobs must be at least 1"),
    ("batch", 0, "--batch must be at least 1"),
    ("mode", "queue", "--mode must be one of lease, lock"),
    ("duration_s", -1, "--duration must be positive"),
    ("claims_per_worker", 0, "--claims-per-worker"),
])
def test_bad_settings_are_rejected_at_once(field, value, message):
    with pytest.raises(UsageError, match=message):
        RunSettings(**{field: value})


def test_bounded_runs_do_not_drain():
    assert RunSettings().drains
    assert not RunSettings(duration_s=5).drains
    assert not RunSettings(claims_per_worker=10).drains


@pytest.mark.parametrize("text,low,high", [("0", 0, 0), ("5", 0.005, 0.005), ("1-10", 0.001, 0.010),
                                           ("exp:5", 0, 1)])
def test_work_time_forms(text, low, high):
    work = WorkTime.parse(text)
    rng = random.Random(1)
    assert all(low <= work.draw_s(rng) <= high for _ in range(100))
    assert str(work) == text


@pytest.mark.parametrize("text", ["fast", "10-1", "-5", "exp:x"])
def test_bad_work_time(text):
    with pytest.raises(UsageError, match="--work-ms"):
        WorkTime.parse(text)


def test_percentiles_nearest_rank():
    values = list(range(1, 101))
    assert percentile(values, 50) == 50 and percentile(values, 99) == 99 and percentile(values, 100) == 100
    assert latency_summary([3.0, 1.0, 2.0]) == {"p50": 2.0, "p95": 3.0, "p99": 3.0, "max": 3.0}
    assert latency_summary([])["p50"] is None
