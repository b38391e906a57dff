"""Memory recall and the retrospective: what they cost in time, AWS calls and dollars.

Recall: the agent gateway's ``recall`` and ``brief`` operations (verify the caller, read the
repository's facts with one Query, rank them, count their use) on DynamoDB under moto, with the
repository's memory full (``memory.max_facts``, 200 by default), as a distribution of wall-clock
milliseconds; and the pure ranking alone over 200 and 1,000 facts.

The retrospective: the router's part (read a busy week of history plus its four weeks of context
from the by-status index, compute the figures, open the issue, record it, hand it over) on moto,
with the DynamoDB items and capacity it reads, and the retrospective agent's task priced with the
default price table at an assumed token count (ASSUMPTIONS: this machine runs no paid model).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from moto import mock_aws

from bench.aws_calls import AwsCalls
from bench.cost import PRICES
from bench.stats import distribution
from bench.support import AWS_UNSET, FAKE_AWS, scoped_env
from squadron.adapters.dynamo_memory import DynamoMemory
from squadron.adapters.sqs import SqsEventQueue
from squadron.domain.cost import DEFAULT_PRICES, cost_of
from squadron.domain.domain_events import (
    AgentStarted,
    PullRequestMerged,
    Repository,
    UsageRecorded,
    event_id,
    make_event,
)
from squadron.domain.effects import OpenRetrospective
from squadron.domain.memory import MemoryPolicy, Writer, rank
from squadron.domain.usage import ModelTokens
from squadron.shell.memory import Memory
from squadron.shell.retrospective import Retrospectives
from tests.support.aws import registry_and_queue
from tests.support.events import T0
from tests.support.fake_registry import FakeRouterGitHub
from tests.support.router_stack import assigned, routed_on_moto

REPEATS = 100
#: A busy week of one repository: issues whose agents each start, open a PR that merges, and
#: record their usage (about five events an issue), for the history the retrospective reads.
BUSY_WEEK_ISSUES = 60

ASSUMPTIONS: dict[str, float] = {
    # The retrospective agent reads its issue, comments, opens a few issues and one PR: a short
    # session. Tokens per retrospective (model input, output) and its task's minutes.
    "retro_input_tokens": 60_000.0,
    "retro_output_tokens": 6_000.0,
    "retro_task_minutes": 5.0,
    # The router's share: one Lambda invocation at its memory.
    "router_memory_gb": 0.5,
}

_WORDS = [
    "tests",
    "build",
    "deploy",
    "redis",
    "migrations",
    "schema",
    "lint",
    "ruff",
    "mypy",
    "docs",
    "release",
    "ci",
    "cache",
    "clock",
    "timezone",
    "fixtures",
    "payments",
    "export",
    "csv",
    "api",
    "auth",
    "tokens",
    "webhooks",
    "queue",
    "retries",
    "backoff",
    "logging",
    "metrics",
]


def _fact(n: int) -> str:
    words = [_WORDS[(n * 7 + k * 3) % len(_WORDS)] for k in range(8)]
    return f"Fact {n}: the {' '.join(words)} need care (learned on #{n})."


def _recall(aws: AwsCalls) -> dict[str, Any]:
    with mock_aws():
        stack = routed_on_moto(assigned(38))
        registry = stack.registry
        store = DynamoMemory(registry.table_name, client=registry.client)
        memory = Memory(store, clock=lambda: T0)
        policy = MemoryPolicy()
        for n in range(policy.max_facts):
            writer = Writer(
                agent_id=f"1-{n + 100}-feat-dev",
                role="feat-dev",
                kind="dev",
                repo_id=1,
                repo_full_name="octo/repo",
                issue_number=n + 100,
            )
            memory.remember(
                writer, text=_fact(n), evidence=f"#{n + 100}", audience="repository", policy=policy
            )
        memory.confirm(1, [f.fact_id for f in store.facts(1)], by="alice", how="bench", policy=policy)
        door = stack.at_the_door(38, memory=store).door
        per_op: dict[str, Any] = {}
        operations: dict[str, Callable[[], object]] = {
            "recall": lambda: door.recall("redis tests clock"),
            "brief": lambda: door.brief("Widget tests fail at midnight"),
        }
        for name, call in operations.items():
            aws.reset()
            times = []
            for _ in range(REPEATS):
                start = time.perf_counter()
                call()
                times.append((time.perf_counter() - start) * 1000)
            per_op[name] = {
                "milliseconds": distribution(times, digits=2),
                "aws_calls_per_call": {
                    f"{svc}:{op}": round(n / REPEATS, 2) for (svc, op), n in sorted(aws.calls.items())
                },
                "dynamodb_per_call": {
                    "items_read": round(aws.dynamo.items_read / REPEATS, 1),
                    "rru": round(aws.dynamo.read_units / REPEATS, 2),
                },
            }
    facts = store_facts_for_rank(1000)
    ranking: dict[str, Any] = {}
    for size in (200, 1000):
        times = []
        for _ in range(REPEATS):
            start = time.perf_counter()
            rank(facts[:size], "redis tests clock timezone")
            times.append((time.perf_counter() - start) * 1000)
        ranking[f"{size}_facts"] = distribution(times, digits=3)
    return {"facts": MemoryPolicy().max_facts, "per_operation": per_op, "rank_only_milliseconds": ranking}


def store_facts_for_rank(count: int) -> list[Any]:
    """``count`` confirmed facts built in memory (the ranking's input, no store)."""
    from squadron.domain.memory import Evidence, MemoryFact, fact_id  # noqa: PLC0415

    return [
        MemoryFact(
            fact_id=fact_id(1, _fact(n)),
            repo_id=1,
            repo_full_name="octo/repo",
            text=_fact(n),
            evidence=Evidence(kind="issue", number=n + 1),
            agent_id="1-1-feat-dev",
            role="feat-dev",
            kind="dev",
            status="confirmed",
            created_at=T0,
            last_used_at=T0,
        )
        for n in range(count)
    ]


def _retrospective(aws: AwsCalls) -> dict[str, Any]:
    with mock_aws():
        registry, sqs, url = registry_and_queue()
        repo = Repository(id=1, full_name="octo/repo")
        events = []
        sonnet = ModelTokens(model="claude-sonnet-4.5", input_tokens=300_000, output_tokens=15_000)
        for n in range(BUSY_WEEK_ISSUES):
            at = T0 - timedelta(days=6) + timedelta(hours=2 * n)
            agent = f"1-{n + 1}-feat-dev"
            for i, data in enumerate(
                (
                    AgentStarted(role="feat-dev", generation=1, kind="dev"),
                    PullRequestMerged(pr_number=1000 + n, head_ref=f"feat/issue-{n + 1}"),
                    UsageRecorded(
                        outcome="idle",
                        tool_calls=40,
                        turns=12,
                        iterations=2,
                        active_seconds=900,
                        tokens=(sonnet,),
                    ),
                )
            ):
                events.append(
                    make_event(
                        data,
                        event_id=event_id(f"bench-{n}", i),
                        at=at + timedelta(minutes=30 * i),
                        repository=repo,
                        correlation_id=f"d-{n}-{i}",
                        installation=77,
                        issue=n + 1,
                        agent=agent,
                    )
                )
        from squadron.domain.effects import Decision  # noqa: PLC0415

        for chunk in range(0, len(events), 90):
            registry.commit([], Decision(f"bench-{chunk}", T0, (), done=True), events[chunk : chunk + 90])
        store = DynamoMemory(registry.table_name, client=registry.client)
        github = FakeRouterGitHub()
        retros = Retrospectives(
            history=registry,
            store=store,
            github=github,
            queue=SqsEventQueue(url, client=sqs),
            bot_login="squadron[bot]",
            clock=lambda: T0,
        )
        aws.reset()
        start = time.perf_counter()
        retros.open(
            OpenRetrospective("octo/repo", 77, 1, "schedule", window_end=T0 + timedelta(hours=1)),
            "bench-retro",
            None,
            DEFAULT_PRICES,
        )
        seconds = time.perf_counter() - start
        dynamo = aws.dynamo.as_dict()
        calls = {f"{svc}:{op}": n for (svc, op), n in sorted(aws.calls.items())}
    agent_cost = cost_of(
        [
            ModelTokens(
                model="claude-sonnet-4.5",
                input_tokens=int(ASSUMPTIONS["retro_input_tokens"]),
                output_tokens=int(ASSUMPTIONS["retro_output_tokens"]),
            )
        ],
        int(ASSUMPTIONS["retro_task_minutes"] * 60),
        DEFAULT_PRICES,
    )
    router_usd = (
        PRICES["lambda_million_requests"] / 1e6
        + seconds * ASSUMPTIONS["router_memory_gb"] * PRICES["lambda_gb_second"]
        + dynamo["capacity_estimate"]["rru"] / 1e6 * PRICES["dynamodb_million_rru"]
        + (dynamo["capacity_estimate"]["wru"] + dynamo["capacity_estimate"]["wru_index"])
        / 1e6
        * PRICES["dynamodb_million_wru"]
    )
    return {
        "history_events": len(events),
        "router_seconds": round(seconds, 3),
        "router_aws_calls": calls,
        "router_dynamodb": dynamo,
        "router_usd": round(router_usd, 6),
        "agent_usd": round(agent_cost.total_usd, 4),
        "agent_usd_parts": {
            "tokens": round(agent_cost.tokens_usd, 4),
            "task_time": round(agent_cost.task_usd, 4),
        },
        "total_usd": round(router_usd + agent_cost.total_usd, 4),
    }


def bench_memory() -> dict[str, Any]:
    aws = AwsCalls()
    with scoped_env(FAKE_AWS, unset=AWS_UNSET), aws.installed():
        recall = _recall(aws)
        retrospective = _retrospective(aws)
    return {
        "method": __doc__.strip().split("\n\n", 1)[1] if __doc__ else "",
        "repeats": REPEATS,
        "assumptions": ASSUMPTIONS,
        "recall": recall,
        "retrospective": retrospective,
    }


def summary(result: dict[str, Any]) -> str:
    recall = result["recall"]["per_operation"]
    retro = result["retrospective"]
    return (
        f"recall {recall['recall']['milliseconds']['p50']} ms p50 over {result['recall']['facts']} facts "
        f"(brief {recall['brief']['milliseconds']['p50']} ms); a retrospective over "
        f"{retro['history_events']} events: router {retro['router_seconds']} s, "
        f"{retro['total_usd']} USD with its agent"
    )
