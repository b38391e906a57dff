"""Run the benchmarks and write one JSON file per benchmark to bench/results/.

Wall-clock numbers belong here, not in tests: a test never depends on speed. Every result
carries the machine, the versions and the commit it was taken on.

    python -m bench                      # all benchmarks
    python -m bench routing              # only those whose name contains "routing"
    python -m bench local_stack agent    # those whose name contains either (one stack run for both)
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import (
    capacity,
    cold_start,
    config_validation,
    cost,
    gateway,
    image,
    imports,
    ingress,
    local,
    memory,
    model_gateway,
    paired,
    pipeline_transitions,
    pm_idle,
    router_calls,
    routing,
    secret_scan,
)
from bench.machine import machine_info

RESULTS = Path(__file__).resolve().parent / "results"


@dataclass(frozen=True)
class Benchmark:
    run: Callable[[], dict[str, Any]]
    summary: Callable[[dict[str, Any]], str]


BENCHMARKS: dict[str, Benchmark] = {
    "ingress_triage": Benchmark(ingress.bench_ingress_triage, ingress.triage_summary),
    "ingress_handler": Benchmark(ingress.bench_ingress_handler, ingress.handler_summary),
    "cold_imports": Benchmark(imports.bench_cold_imports, imports.summary),
    "cold_start": Benchmark(cold_start.bench_cold_start, cold_start.summary),
    "routing_lifecycle": Benchmark(routing.bench_routing_lifecycle, routing.summary),
    "config_validation": Benchmark(config_validation.bench_config_validation, config_validation.summary),
    "router_calls": Benchmark(router_calls.bench_router_calls, router_calls.summary),
    "gateway": Benchmark(gateway.bench_gateway, gateway.summary),
    "secret_scan": Benchmark(secret_scan.bench_secret_scan, secret_scan.summary),
    "model_gateway": Benchmark(model_gateway.bench_model_gateway, model_gateway.summary),
    "pm_idle": Benchmark(pm_idle.bench_pm_idle, pm_idle.summary),
    "memory": Benchmark(memory.bench_memory, memory.summary),
    # Step Functions state transitions per pipeline run on moto's interpreter, and their price.
    "pipeline_transitions": Benchmark(
        pipeline_transitions.bench_pipeline_transitions, pipeline_transitions.summary
    ),
    # Not a measurement: the cost model over router_calls' counts (so it runs after it).
    "cost": Benchmark(cost.bench_cost, cost.summary),
    # Not a measurement: the capacity model over router_calls' and gateway's figures.
    "capacity": Benchmark(capacity.bench_capacity, capacity.summary),
    "image": Benchmark(image.bench_image, image.summary),
    "local_stack": Benchmark(local.bench_local_stack, local.stack_summary),
    "agent_host": Benchmark(local.bench_agent_host, local.agent_summary),
    # Two local stacks per round (this checkout and the turn-2 commit): PAIRED_SIZE=smallest to try it.
    "paired_turn2": Benchmark(paired.bench_paired, paired.summary),
}


def run(name: str, benchmark: Benchmark) -> dict[str, Any]:
    measured_at = datetime.now(UTC).isoformat(timespec="seconds")
    machine = machine_info()  # before: its load average is the machine's, not the benchmark's
    started = time.perf_counter()
    figures = benchmark.run()
    return {
        "benchmark": name,
        "measured_at": measured_at,
        **machine,
        "duration_seconds": round(time.perf_counter() - started, 1),
        **figures,
    }


def main(argv: list[str]) -> int:
    wanted = argv or [""]
    chosen = {name: bench for name, bench in BENCHMARKS.items() if any(part in name for part in wanted)}
    if not chosen:
        print(f"no benchmark's name contains {' or '.join(wanted)}; there are: {', '.join(BENCHMARKS)}")
        return 2
    RESULTS.mkdir(exist_ok=True)
    for name, benchmark in chosen.items():
        result = run(name, benchmark)
        path = RESULTS / f"{name}.json"
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        temporary.replace(path)
        print(f"{name}: {benchmark.summary(result)} -> {path.relative_to(RESULTS.parents[1])}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
