"""The latency the secret scan adds to each agent write (issue 27 item 8).

Every write the gateway carries out for an agent is scanned first
(:func:`squadron.adapters.secret_scan.find_secrets`). Measured on: a typical comment (a few
hundred characters), the largest body GitHub takes (65,536 characters of Markdown and code),
and the worst text the bounds let through (:data:`~squadron.domain.threats.MAX_SCAN_CHARS` of
lines :data:`~squadron.domain.threats.MAX_LINE_CHARS` long), each clean (a hit ends the scan's
use anyway: the write is refused).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from squadron.adapters.secret_scan import find_secrets
from squadron.domain.threats import MAX_LINE_CHARS, MAX_SCAN_CHARS

REPEATS = 7

_CODE = (
    "def export(rows):\n"
    "    # 0123456789abcdef0123456789abcdef01234567 fixed the off-by-one\n"
    "    return [row.as_csv() for row in rows if row.visible]\n"
)


def _comment() -> str:
    return "Pushed 1a2b3c4: the export endpoint now streams CSV. See #38 and the v2 schema.\n" * 4


def _largest_body() -> str:
    return (_CODE * (65_536 // len(_CODE) + 1))[:65_536]


def _worst_within_bounds() -> str:
    line = ("x9" * (MAX_LINE_CHARS // 2))[: MAX_LINE_CHARS - 1] + "\n"
    return (line * (MAX_SCAN_CHARS // len(line) + 1))[:MAX_SCAN_CHARS]


def _median_ms(text: str) -> tuple[float, float]:
    times: list[float] = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        found = find_secrets([("body", text)])
        times.append((time.perf_counter() - started) * 1000)
        assert found == [], found  # the texts are clean: a hit would measure something else
    return round(statistics.median(times), 2), round(max(times), 2)


def bench_secret_scan() -> dict[str, Any]:
    cases: dict[str, Callable[[], str]] = {
        "comment": _comment,
        "largest_body": _largest_body,
        "worst_within_bounds": _worst_within_bounds,
    }
    result: dict[str, Any] = {"repeats": REPEATS}
    for name, make in cases.items():
        text = make()
        median, worst = _median_ms(text)
        result[name] = {"chars": len(text), "ms_median": median, "ms_max": worst}
    return result


def summary(result: dict[str, Any]) -> str:
    return (
        f"the secret scan adds {result['comment']['ms_median']} ms to a comment, "
        f"{result['largest_body']['ms_median']} ms to the largest body "
        f"({result['largest_body']['chars']} chars) and at most "
        f"{result['worst_within_bounds']['ms_median']} ms to the worst text the bounds let through"
    )
