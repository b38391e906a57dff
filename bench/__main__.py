"""Run every benchmark and write one JSON file per benchmark to bench/results/.

Wall-clock numbers belong here, not in tests: a test never depends on speed.

    python -m bench            # all benchmarks
    python -m bench routing    # only those whose name contains "routing"
"""

from __future__ import annotations

import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from squadron.domain.webhook import Accepted, AppIdentity, sign, triage_webhook
from tests.support.webhook_examples import load_examples
from tests.support.world import World

RESULTS = Path(__file__).resolve().parent / "results"


def _timed(run: Callable[[], int], repeats: int) -> dict[str, Any]:
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


def bench_ingress_triage() -> dict[str, Any]:
    """Signature check + validation + envelope for every published webhook example."""
    secret = "bench-secret"  # noqa: S105 - a throwaway HMAC key for the benchmark
    app = AppIdentity(app_id=1, slug="squadron")
    requests = []
    for item in load_examples():
        body = json.dumps(item.payload).encode()
        headers = {
            "X-GitHub-Event": item.event,
            "X-GitHub-Delivery": f"d-{item.index}",
            "X-Hub-Signature-256": sign(body, secret),
        }
        requests.append((headers, body))
    now = datetime.now(UTC)

    def run() -> int:
        accepted = 0
        for headers, body in requests:
            decision = triage_webhook(
                headers=headers, body=body, secret=secret, app=app, max_body_bytes=1 << 20, received_at=now
            )
            accepted += isinstance(decision, Accepted)
        return len(requests)

    return {"examples": len(requests), **_timed(run, repeats=5)}


def bench_routing_lifecycle() -> dict[str, Any]:
    """Routing core + shell over the in-memory registry: a full issue lifecycle per issue."""
    issues = 200

    def run() -> int:
        world = World()
        e = world.events
        sent = 0
        for n in range(1, issues + 1):
            blocker = n + issues
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

    return {"issues": issues, **_timed(run, repeats=3)}


BENCHMARKS: dict[str, Callable[[], dict[str, Any]]] = {
    "ingress_triage": bench_ingress_triage,
    "routing_lifecycle": bench_routing_lifecycle,
}


def main(argv: list[str]) -> int:
    wanted = argv[0] if argv else ""
    RESULTS.mkdir(exist_ok=True)
    for name, bench in BENCHMARKS.items():
        if wanted not in name:
            continue
        result = {
            "benchmark": name,
            "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "python": platform.python_version(),
            "machine": platform.machine(),
            **bench(),
        }
        path = RESULTS / f"{name}.json"
        path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"{name}: {result['ops_per_second_median']} ops/s -> {path.relative_to(Path.cwd())}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
