"""The routing core and shell over the in-memory registry (no AWS): a full lifecycle per issue."""

from __future__ import annotations

from typing import Any

from bench.timing import timed
from tests.support.world import World

ISSUES = 200


def bench_routing_lifecycle() -> dict[str, Any]:
    """Assigned, blocked and asleep, woken, PR, review, merged: six events per issue."""

    def run() -> int:
        world = World()
        e = world.events
        sent = 0
        for n in range(1, ISSUES + 1):
            blocker = n + ISSUES
            script = [
                e.assigned(n),
                e.register_blocker(n, blocker, agent_id=f"1-{n}-feat-dev", sleep=True),
                e.closed(blocker),
                e.pr(10_000 + n, f"feat/issue-{n}", f"Fixes #{n}"),
                e.review(10_000 + n, f"feat/issue-{n}", "changes_requested"),
                e.pr_closed(10_000 + n, f"feat/issue-{n}", merged=True, body=f"Fixes #{n}"),
            ]
            for event in script:
                world.send(event)
                sent += 1
        return sent

    return {"issues": ISSUES, **timed(run, repeats=3)}


def summary(result: dict[str, Any]) -> str:
    return f"{result['ops_per_second_median']} events/s ({result['microseconds_per_op_median']} us each)"
