"""The task's model gateway: what it adds to each model call, against the same call made directly.

The agent's Copilot CLI reaches its model through the host's loopback gateway
(squadron.adapters.model_gateway), which checks the launch's token, the endpoint and the model,
asks the budget, adds the key, forwards, and reads the usage. Measured here, paired: each round
sends the same chat completion (a conversation of ``CONVERSATION_BYTES``, as the CLI sends its
whole conversation every call) straight to a provider stand-in on 127.0.0.1 and through the
gateway, in alternating order; the figure is the difference within each pair. A real provider
answers in hundreds of milliseconds to seconds; the gateway's share is what this adds to that.

While a repository sets ``issue_budget_usd``, the host also asks the agent gateway, before each call
it admits, what the issue's other agents have spent (``issue_spend``, which reports this task's own
spend): the same call is made a third way, through the gateway with that round trip in its
admission (the agent gateway in process, its DynamoDB and SQS on moto), in rotating order, and the
round trip is timed alone too. Lambda's invoke overhead is not in it (bench/gateway.py assumes it).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
from moto import mock_aws

from bench.gateway import ASSUMPTIONS
from bench.stats import distribution, median
from bench.support import AWS_UNSET, FAKE_AWS, scoped_env
from squadron.adapters.model_gateway import ModelGateway, Upstream
from squadron.agent.door import Door
from squadron.domain.usage import ModelTokens
from squadron.local.model import LocalModel
from tests.support.router_stack import assigned, routed_on_moto

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


@contextmanager
def _agent_door() -> Iterator[Door]:
    """An agent's door to the agent gateway (in process, on moto), its launch begun: what the host asks."""
    with scoped_env(FAKE_AWS, unset=AWS_UNSET), mock_aws():
        yield routed_on_moto(assigned(38)).at_the_door(38).door


def bench_model_gateway(repeats: int = REPEATS) -> dict[str, Any]:
    model = LocalModel(key="sk-bench-key")
    base_url = model.start()
    gateways = {
        name: ModelGateway(Upstream("openai", base_url, "sk-bench-key"), models=frozenset({MODEL}))
        for name in ("gateway", "budgeted")
    }
    counted: list[tuple[str, int, int]] = []
    spend_ms: list[float] = []
    body = _request()
    routes: dict[str, tuple[str, dict[str, str]]] = {
        "direct": (f"{base_url}/chat/completions", {"authorization": "Bearer sk-bench-key"}),
    }
    for name, gateway in gateways.items():
        gateway.count = lambda m, i, o: counted.append((m, i, o))
        routes[name] = (
            f"{gateway.provider()['base_url']}/chat/completions",
            {"authorization": f"Bearer {gateway.token}"},
        )
    times: dict[str, list[float]] = {name: [] for name in routes}
    try:
        with httpx.Client(timeout=30) as client, _agent_door() as door:
            gateways["gateway"].admit = lambda name: None

            def issue_spend(name: str) -> str | None:
                # What the host's admission asks while a budget is set (agent/spending.py).
                started = time.perf_counter()
                door.issue_spend((ModelTokens(model=MODEL, input_tokens=len(counted), output_tokens=1),), 1)
                spend_ms.append((time.perf_counter() - started) * 1000)
                return None

            gateways["budgeted"].admit = issue_spend

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

            names = list(routes)
            for route in names:  # warm every path (connections, the first request's imports)
                timed(route)
            spend_ms.clear()
            for number in range(repeats):
                shift = number % len(names)  # each route first, second and third in turn
                for route in names[shift:] + names[:shift]:
                    times[route].append(timed(route))
    finally:
        for gateway in gateways.values():
            gateway.stop()
        model.stop()
    added = _paired(times["gateway"], times["direct"])
    budget_added = _paired(times["budgeted"], times["gateway"])
    return {
        "repeats": repeats,
        "conversation_bytes": len(body),
        "direct_ms": distribution(times["direct"], digits=2),
        "gateway_ms": distribution(times["gateway"], digits=2),
        "added_ms": distribution(added, digits=2),
        "added_ms_median": median(added, digits=2),
        "with_issue_budget_ms": distribution(times["budgeted"], digits=2),
        "issue_spend_added_ms": distribution(budget_added, digits=2),
        "issue_spend_added_ms_median": median(budget_added, digits=2),
        "issue_spend_round_trip_ms": distribution(spend_ms, digits=2),
        "assumed_invoke_overhead_ms": ASSUMPTIONS["invoke_overhead_ms"],
        "calls_counted": len(counted),
    }


def _paired(through: list[float], against: list[float]) -> list[float]:
    return [a - b for a, b in zip(through, against, strict=True)]


def summary(result: dict[str, Any]) -> str:
    added = result["added_ms"]
    return (
        f"the model gateway adds {result['added_ms_median']} ms a call (median of {result['repeats']} pairs, "
        f"p90 {added['p90']} ms) to {result['direct_ms']['p50']} ms direct on loopback; an issue budget's "
        f"issue_spend adds {result['issue_spend_added_ms_median']} ms more (its round trip "
        f"{result['issue_spend_round_trip_ms']['p50']} ms in process, plus a Lambda invoke in AWS)"
    )
