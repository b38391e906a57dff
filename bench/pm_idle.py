"""Inbox reads of a lingering agent task with no news: the host's own waiting, measured.

A lingering PM waits for news after its batch (SQUADRON_PM_LINGER_SECONDS); each look is a call
of the agent gateway (one DynamoDB read). This runs the host's real waiting loop
(``AgentHost._news``) for a minute against a door that counts its reads and never has news,
and compares with polling once a second.
"""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

from squadron.agent.host import AgentHost
from squadron.domain.lifecycle import NEWS_POLL_SECONDS, poll_times

IDLE_SECONDS = 60.0


class CountingDoor:
    def __init__(self) -> None:
        self.reads: list[float] = []
        self.started = time.monotonic()

    def inbox_news(self) -> tuple[list[Any], list[str]]:
        self.reads.append(round(time.monotonic() - self.started, 2))
        return [], []


def bench_pm_idle() -> dict[str, Any]:
    door = CountingDoor()
    waiting = SimpleNamespace(door=door, linger_seconds=IDLE_SECONDS, stop=asyncio.Event(), lease_lost=False)
    news = asyncio.run(AgentHost._news(waiting))  # type: ignore[arg-type]
    return {
        "method": (
            "AgentHost._news run for real over a minute with no news, against a door that counts "
            "inbox reads (each a gateway call and one DynamoDB read when deployed)"
        ),
        "idle_seconds": IDLE_SECONDS,
        "news_found": news,
        "poll_pauses_seconds": list(NEWS_POLL_SECONDS),
        "reads_per_idle_minute": len(door.reads),
        "read_at_seconds": door.reads,
        "expected_read_times": poll_times(IDLE_SECONDS),
        "reads_per_idle_minute_polling_every_second": int(IDLE_SECONDS) + 1,
    }


def summary(result: dict[str, Any]) -> str:
    return (
        f"{result['reads_per_idle_minute']} inbox reads per idle minute "
        f"(polling every second: {result['reads_per_idle_minute_polling_every_second']})"
    )
