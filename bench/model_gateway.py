"""The task's model gateway: what it adds to each model call, against the same call made directly.

The agent's Copilot CLI reaches its model through the host's loopback gateway
(squadron.adapters.model_gateway), which checks the launch's token, the endpoint and the model,
asks the budget, adds the key, forwards, and reads the usage. Measured here, paired: each round
sends the same chat completion (a conversation of ``CONVERSATION_BYTES``, as the CLI sends its
whole conversation every call) straight to a provider stand-in on 127.0.0.1 and through the
gateway, in alternating order; the figure is the difference within each pair. A real provider
answers in hundreds of milliseconds to seconds; the gateway's share is what this adds to that.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

from bench.stats import distribution, median
from squadron.adapters.model_gateway import ModelGateway, Upstream
from squadron.local.model import LocalModel

REPEATS = 200
MODEL = "claude-sonnet-4.5"
#: The size of the conversation each call carries (a few turns with tool results).
CONVERSATION_BYTES = 20_000


def _request() -> bytes:
    filler = "x" * (CONVERSATION_BYTES // 4)
    messages = [
        {"role": "system", "content": filler},
        {"role": "user", "content": filler},
        {"role": "assistant", "content": filler},
        {"role": "user", "content": filler},
    ]
    return json.dumps({"model": MODEL, "messages": messages}).encode()


def bench_model_gateway() -> dict[str, Any]:
    model = LocalModel(key="sk-bench-key")
    base_url = model.start()
    gateway = ModelGateway(Upstream("openai", base_url, "sk-bench-key"), models=frozenset({MODEL}))
    gateway.admit = lambda name: None
    counted: list[tuple[str, int, int]] = []
    gateway.count = lambda name, i, o: counted.append((name, i, o))
    provider = gateway.provider()
    body = _request()
    routes = {
        "direct": (f"{base_url}/chat/completions", {"authorization": "Bearer sk-bench-key"}),
        "gateway": (f"{provider['base_url']}/chat/completions", {"authorization": f"Bearer {gateway.token}"}),
    }
    times: dict[str, list[float]] = {"direct": [], "gateway": []}
    try:
        with httpx.Client(timeout=30) as client:

            def timed(route: str) -> float:
                url, headers = routes[route]
                started = time.perf_counter()
                answer = client.post(
                    url, content=body, headers={**headers, "content-type": "application/json"}
                )
                elapsed = (time.perf_counter() - started) * 1000
                if answer.status_code != 200:
                    raise RuntimeError(f"{route}: {answer.status_code} {answer.text[:200]}")
                return elapsed

            for route in routes:  # warm both paths (connections, the first request's imports)
                timed(route)
            for number in range(REPEATS):
                order = ("direct", "gateway") if number % 2 == 0 else ("gateway", "direct")
                for route in order:
                    times[route].append(timed(route))
    finally:
        gateway.stop()
        model.stop()
    added = [through - direct for through, direct in zip(times["gateway"], times["direct"], strict=True)]
    return {
        "repeats": REPEATS,
        "conversation_bytes": len(body),
        "direct_ms": distribution(times["direct"], digits=2),
        "gateway_ms": distribution(times["gateway"], digits=2),
        "added_ms": distribution(added, digits=2),
        "added_ms_median": median(added, digits=2),
        "calls_counted": len(counted),
    }


def summary(result: dict[str, Any]) -> str:
    added = result["added_ms"]
    return (
        f"the model gateway adds {result['added_ms_median']} ms a call (median of {result['repeats']} pairs, "
        f"p90 {added['p90']} ms) to {result['direct_ms']['p50']} ms direct on loopback"
    )
