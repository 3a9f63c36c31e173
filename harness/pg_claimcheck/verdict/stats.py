"""Summary statistics of plain numbers."""
from __future__ import annotations

import itertools
import math
from collections import Counter
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
        return dict.fromkeys([*(f"p{p}" for p in PERCENTILES), "max"])
    summary: dict[str, float | None] = {f"p{p}": round(percentile(ordered, p), 3) for p in PERCENTILES}
    summary["max"] = round(float(ordered[-1]), 3)
    return summary


def median(values: Sequence[float]) -> float:
    """The middle value (the mean of the two middle ones for an even count)."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    mid = len(ordered) // 2
    return float(ordered[mid]) if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def spread(values: Sequence[float]) -> dict[str, float | int]:
    """`n`, `median`, `min`, `max` and `mad` (median absolute deviation from the median), rounded."""
    mid = median(values)
    return {"n": len(values), "median": round(mid, 1), "min": round(min(values), 1), "max": round(max(values), 1),
            "mad": round(median([abs(v - mid) for v in values]), 1)}


EXACT_SPLITS_MAX = 20_000
"""Up to this many ways of splitting the pooled samples, the U test's p-value is exact (all splits
enumerated: 5+5 samples is 252 splits, 8+8 is 12,870); beyond, the normal approximation."""


def mann_whitney_less(new: Sequence[float], base: Sequence[float]) -> float:
    """One-sided Mann-Whitney U test: the p-value of "values in `new` tend to be smaller than in `base`".

    U counts the (new, base) pairs where the new value is smaller (ties count a half). The p-value
    is the share of all equally likely splits of the pooled values into groups of these sizes whose
    U is at least the one observed: exact by enumeration for small samples, else the normal
    approximation with tie and continuity corrections. No ordering assumption beyond exchangeability
    under "no change", which is why it suits noisy, skewed throughput figures.
    """
    n, m = len(new), len(base)
    if not n or not m:
        return 1.0

    def u_of(xs: Sequence[float], ys: Sequence[float]) -> float:
        return sum(1.0 if x < y else 0.5 if x == y else 0.0 for x in xs for y in ys)

    observed = u_of(new, base)
    pooled = list(new) + list(base)
    if math.comb(n + m, n) <= EXACT_SPLITS_MAX:
        at_least = total = 0
        for picked in itertools.combinations(range(n + m), n):
            chosen = set(picked)
            xs = [pooled[i] for i in picked]
            ys = [pooled[i] for i in range(n + m) if i not in chosen]
            total += 1
            at_least += u_of(xs, ys) >= observed - 1e-9
        return at_least / total
    ranks = _midranks(pooled)
    ties = Counter(pooled).values()
    mean = n * m / 2
    var = n * m / 12 * ((n + m + 1) - sum(t ** 3 - t for t in ties) / ((n + m) * (n + m - 1)))
    if var <= 0:
        return 1.0
    # U of "new smaller" is n*m - U_new(rank-sum form); large U means new is smaller.
    u_new_larger = sum(ranks[:n]) - n * (n + 1) / 2
    z = (n * m - u_new_larger - mean - 0.5) / math.sqrt(var)
    return 0.5 * math.erfc(z / math.sqrt(2))


def _midranks(values: Sequence[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks
