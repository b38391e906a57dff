"""The agent gateway: what one call costs in time and AWS calls, and what it costs per agent-task hour.

Every call of an agent task to the framework goes through the gateway (squadron.shell.gateway),
which verifies the launch's secret first. Measured here: the gateway's own work per operation
(parse, verify, act; DynamoDB and SQS on moto in process, GitHub answered by the tests' fake),
as a distribution of wall-clock time and the AWS calls each makes. Lambda's invoke overhead in
AWS cannot be measured on this machine: it is an assumption (ASSUMPTIONS), as are the calls an
hour of agent work makes beyond the fixed ones (heartbeats at the default interval, a token
refresh an hour, one begin, one end).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from moto import mock_aws

from bench.aws_calls import AwsCalls
from bench.cost import PRICES
from bench.stats import distribution
from bench.support import AWS_UNSET, FAKE_AWS, scoped_env
from squadron.agent.door import Door
from squadron.domain.commands import TaskUsage
from squadron.domain.repo_config.models import RuntimeLimits
from tests.support.gateway import door_of, in_process
from tests.support.router_stack import assigned, routed_on_moto

REPEATS = 200
#: The gateway's memory (infra/constructs/agents.py).
GATEWAY_MEMORY_GB = 0.25

ASSUMPTIONS: dict[str, float] = {
    # A warm synchronous Lambda invoke from a Fargate task in the same region, beyond the
    # function's own work: a few tens of milliseconds.
    "invoke_overhead_ms": 25.0,
    # What an hour of agent work asks beyond heartbeats: reading its inbox (check_for_events)
    # and acknowledging it, what it tells the router (PRs, reviews, blockers), token refreshes.
    "inbox_reads_per_hour": 20.0,
    "acks_per_hour": 10.0,
    "sends_per_hour": 6.0,
    "token_refreshes_per_hour": 1.0,
}


def _per_hour(heartbeat_seconds: int) -> dict[str, float]:
    """Gateway calls of one agent-task hour, by operation (a task that begins and ends in it)."""
    a = ASSUMPTIONS
    return {
        "whoami": 1,
        "begin": 1,
        "model_key": 1,
        "github_token": 1 + a["token_refreshes_per_hour"],
        "heartbeat": 3600 / heartbeat_seconds,
        "inbox": a["inbox_reads_per_hour"],
        "ack": a["acks_per_hour"],
        "send": a["sends_per_hour"] + 1,  # and the task's end
        "release": 1,
        "metrics": 1,
        "purge_claim": 1,  # the janitor's pass at the task's start (and "purged" when some were due)
    }


def _timed(call: Callable[[], Any], aws: AwsCalls) -> tuple[list[float], dict[str, float]]:
    """``call`` REPEATS times: the milliseconds of each, and its AWS calls per call by operation."""
    aws.reset()
    times: list[float] = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000)
    return times, {f"{svc}:{op}": round(n / REPEATS, 2) for (svc, op), n in sorted(aws.calls.items())}


def bench_gateway() -> dict[str, Any]:
    aws = AwsCalls()
    with scoped_env(FAKE_AWS, unset=AWS_UNSET), aws.installed(), mock_aws():
        stack = routed_on_moto(assigned(38), lambda events: events.comment(38, "use the v2 schema"))
        at = stack.at_the_door(38)
        gateway, agent, door = at.gateway, at.agent, at.door
        wrong = Door(
            in_process(gateway), agent_id=agent.agent_id, launch_token=agent.launch_token, secret="x" * 43
        )

        def refused() -> None:
            try:
                wrong.github_token()
            except Exception:  # the refusal is what is timed
                return

        def token() -> None:
            # A fresh door asks each time (a door reuses its token for the hour).
            door_of(gateway, stack.launcher, agent).github_token()

        operations: dict[str, Callable[[], Any]] = {
            "whoami": door.whoami,
            "heartbeat": door.heartbeat,
            "inbox": door.pending_inbox,
            "github_token": token,
            "send": lambda: door.register_blocker(38, 40, sleep=False, note="n", what="bench"),
            "task_ended": lambda: door.task_ended("idle", usage=TaskUsage()),
            "purge_claim (nothing due)": door.purge_claim,
            "refused (wrong secret)": refused,
        }
        per_call: dict[str, Any] = {}
        for name, call in operations.items():
            times, calls = _timed(call, aws)
            per_call[name] = {"milliseconds": distribution(times, digits=2), "aws_calls": calls}
    heartbeat = int(RuntimeLimits().heartbeat_interval)
    hour = _per_hour(heartbeat)
    invocations = sum(hour.values())
    work_ms = per_call["heartbeat"]["milliseconds"]["p50"]
    gb_seconds = invocations * (work_ms + ASSUMPTIONS["invoke_overhead_ms"]) / 1000 * GATEWAY_MEMORY_GB
    dynamodb_calls = invocations * 2  # a verify (GetItem) and about one more read or write per call
    cost = {
        "lambda_requests": invocations / 1e6 * PRICES["lambda_million_requests"],
        "lambda_duration": gb_seconds * PRICES["lambda_gb_second"],
        "dynamodb": dynamodb_calls / 2 / 1e6 * PRICES["dynamodb_million_rru"]
        + dynamodb_calls / 2 / 1e6 * PRICES["dynamodb_million_wru"],
    }
    return {
        "repeats": REPEATS,
        "per_call": per_call,
        "assumptions": {**ASSUMPTIONS, "heartbeat_interval_seconds": heartbeat},
        "calls_per_agent_hour": {name: round(n, 1) for name, n in hour.items()},
        "invocations_per_agent_hour": round(invocations, 1),
        "usd_per_agent_hour": {name: round(value, 6) for name, value in cost.items()},
        "usd_per_agent_hour_total": round(sum(cost.values()), 6),
    }


def summary(result: dict[str, Any]) -> str:
    calls = result["per_call"]
    return (
        f"heartbeat {calls['heartbeat']['milliseconds']['p50']} ms p50, token "
        f"{calls['github_token']['milliseconds']['p50']} ms, refused "
        f"{calls['refused (wrong secret)']['milliseconds']['p50']} ms; "
        f"{result['invocations_per_agent_hour']} calls and {result['usd_per_agent_hour_total']:.6f} USD "
        "per agent-task hour"
    )
