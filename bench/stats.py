"""Percentiles and other small summaries, rounded so the result files read well."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from typing import Any


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100), linearly interpolated between the closest ranks."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def distribution(
    values: Iterable[float], *, digits: int = 1, quantiles: tuple[int, ...] = (50, 90, 99)
) -> dict[str, Any]:
    """``count``, the percentiles asked for, ``max`` (and ``min``), rounded to ``digits``."""
    data = list(values)
    if not data:
        return {"count": 0}
    summary: dict[str, Any] = {"count": len(data)}
    for q in quantiles:
        summary[f"p{q}"] = round(percentile(data, q), digits)
    summary["max"] = round(max(data), digits)
    summary["min"] = round(min(data), digits)
    return summary


def median(values: Iterable[float], digits: int = 1) -> float | None:
    data = list(values)
    return round(statistics.median(data), digits) if data else None
