"""Throughput of a repeated run, for the pure in-process benchmarks."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any


def timed(run: Callable[[], int], repeats: int) -> dict[str, Any]:
    """Run ``run`` (which returns how many operations it did) ``repeats`` times."""
    rates: list[float] = []
    ops = 0
    for _ in range(repeats):
        start = time.perf_counter()
        ops = run()
        elapsed = time.perf_counter() - start
        rates.append(ops / elapsed)
    return {
        "operations_per_run": ops,
        "repeats": repeats,
        "ops_per_second_median": round(statistics.median(rates), 1),
        "ops_per_second_min": round(min(rates), 1),
        "microseconds_per_op_median": round(1e6 / statistics.median(rates), 2),
    }
