"""Summary statistics of plain numbers."""
from __future__ import annotations

import math
from typing import Iterable, Sequence

PERCENTILES = (50, 95, 99)


def percentile(sorted_values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile of an already sorted sequence (nan when empty)."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(pct / 100 * len(sorted_values)))
    return float(sorted_values[rank - 1])


def latency_summary(values: Iterable[float]) -> dict[str, float | None]:
    """`{"p50", "p95", "p99", "max"}` in the unit given, rounded; None when there is no sample."""
    ordered = sorted(values)
    if not ordered:
        return {f"p{p}": None for p in PERCENTILES} | {"max": None}
    summary = {f"p{p}": round(percentile(ordered, p), 3) for p in PERCENTILES}
    summary["max"] = round(float(ordered[-1]), 3)
    return summary
