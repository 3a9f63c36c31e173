import random

import pytest

from pg_claimcheck.errors import UsageError
from pg_claimcheck.settings import RunSettings, WorkTime
from pg_claimcheck.verdict.stats import latency_summary, percentile


@pytest.mark.parametrize("field,value,message", [
    ("workers", 0, "--workers must be between 1 and 64"),
    ("workers", 65, "--workers must be between 1 and 64"),
    ("jobs", 0, "--jobs must be between 1 and 1,000,000"),
    ("jobs", 99_999_999_999, "--jobs must be between 1 and 1,000,000, got 99,999,999,999"),
    ("batch", 0, "--batch must be between 1 and 10,000"),
    ("mode", "queue", "--mode must be one of lease, lock"),
    ("duration_s", -1, "--duration must be positive"),
    ("claims_per_worker", 0, "--claims-per-worker"),
    # NaN compares false with everything, so `x < 0` let it through; infinities are no duration.
    ("duration_s", float("nan"), "--duration must be positive and at most 86,400, got nan"),
    ("duration_s", float("inf"), "--duration must be positive and at most 86,400, got inf"),
    ("poll_ms", float("nan"), "--poll-ms must be between 0 and 60,000, got nan"),
    ("poll_ms", float("inf"), "--poll-ms must be between 0 and 60,000, got inf"),
    ("lease_seconds", float("nan"), "--lease-seconds must be positive and at most 86,400, got nan"),
    ("backoff_unit_s", float("nan"), "--backoff-unit must be between 0 and 86,400, got nan"),
    ("backoff_cap_s", float("inf"), "--backoff-cap must be between 0 and 86,400, got inf"),
    ("reap_every_s", float("nan"), "--reap-every must be positive and at most 86,400, got nan"),
    ("fail_rate", float("nan"), "--fail-rate must be at least 0 and below 1, got nan"),
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


@pytest.mark.parametrize("text", ["fast", "10-1", "-5", "exp:x", "nan", "inf", "1-nan", "exp:nan", "1-1e400",
                                  "60001"])
def test_bad_work_time(text):
    with pytest.raises(UsageError, match="--work-ms"):
        WorkTime.parse(text)


def test_percentiles_nearest_rank():
    values = list(range(1, 101))
    assert percentile(values, 50) == 50 and percentile(values, 99) == 99 and percentile(values, 100) == 100
    assert latency_summary([3.0, 1.0, 2.0]) == {"p50": 2.0, "p95": 3.0, "p99": 3.0, "max": 3.0}
    assert latency_summary([])["p50"] is None
