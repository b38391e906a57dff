"""Cost per agent, issue and issue tree: tokens per model and task time, priced by a table."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from copilot.generated.session_events import SessionEventType

from squadron.adapters.copilot import usage_listener
from squadron.config.parse import parse_files
from squadron.config.policy import routing_policy
from squadron.domain.agents import AgentStatus
from squadron.domain.commands import TaskUsage
from squadron.domain.cost import (
    DEFAULT_PRICES,
    Cost,
    ModelPrice,
    PriceTable,
    cost_of,
    issue_costs,
    tree_cost,
    usd,
)
from squadron.domain.effects import AgentWrite
from squadron.domain.routing import RoutingPolicy
from squadron.domain.usage import MAX_MODELS, ModelTokens, add_tokens
from tests.support.world import World
from tests.unit.test_task_ended_routing import A38, ended, working


def tokens(model: str, i: int, o: int) -> ModelTokens:
    return ModelTokens(model=model, input_tokens=i, output_tokens=o)


PRICES = [
    # (id, model, the price found)
    (
        "a prefix entry",
        "claude-sonnet-4.5",
        ModelPrice(input_usd_per_million=3.0, output_usd_per_million=15.0),
    ),
    (
        "the longest prefix wins",
        "gpt-4.1-mini",
        ModelPrice(input_usd_per_million=0.4, output_usd_per_million=1.6),
    ),
    ("an exact entry", "house", ModelPrice(input_usd_per_million=9.0, output_usd_per_million=9.0)),
    ("unknown", "llama-3", None),
]
TABLE = PriceTable(
    models={
        **DEFAULT_PRICES.models,
        "gpt-4.1-mini*": ModelPrice(input_usd_per_million=0.4, output_usd_per_million=1.6),
        "house": ModelPrice(input_usd_per_million=9.0, output_usd_per_million=9.0),
    },
    task_usd_per_hour=0.10,
)


@pytest.mark.parametrize(("model", "expected"), [p[1:] for p in PRICES], ids=[p[0] for p in PRICES])
def test_a_model_is_priced_exactly_else_by_its_longest_prefix(
    model: str, expected: ModelPrice | None
) -> None:
    assert TABLE.price_of(model) == expected


def test_tokens_and_task_time_are_priced_and_an_unknown_model_is_named_not_free() -> None:
    cost = cost_of([tokens("house", 2_000_000, 1_000_000), tokens("llama-3", 10, 0)], 1800, TABLE)
    assert cost == Cost(tokens_usd=27.0, task_usd=0.05, unpriced=frozenset({"llama-3"}))
    assert cost.total_usd == pytest.approx(27.05)
    assert cost_of([tokens("llama-3", 0, 0)], 0, TABLE).unpriced == frozenset()  # nothing used


def test_a_tree_counts_each_blocking_issue_once_even_in_a_cycle() -> None:
    per_issue = {1: Cost(1.0), 2: Cost(2.0), 3: Cost(4.0), 9: Cost(100.0)}
    blocked_by = {1: [2, 3], 2: [3], 3: [1]}
    assert tree_cost(1, per_issue, blocked_by).total_usd == 7.0
    assert tree_cost(2, per_issue, blocked_by).total_usd == 7.0
    assert tree_cost(9, per_issue, blocked_by).total_usd == 100.0
    assert tree_cost(42, per_issue, blocked_by).total_usd == 0.0


@pytest.mark.parametrize(
    ("amount", "shown"), [(0, "$0.00"), (0.0042, "$0.0042"), (1.234, "$1.23"), (12, "$12.00")]
)
def test_dollars_as_people_read_them(amount: float, shown: str) -> None:
    assert usd(amount) == shown


def test_tokens_add_up_per_model_and_stay_bounded() -> None:
    kept = (tokens("a", 1, 2), tokens("b", 3, 4))
    assert add_tokens(kept, (tokens("b", 10, 10), tokens("c", 1, 1))) == (
        tokens("a", 1, 2),
        tokens("b", 13, 14),
        tokens("c", 1, 1),
    )
    many = tuple(tokens(f"m{n:02}", 1, 1) for n in range(MAX_MODELS + 5))
    added = add_tokens((), many)
    assert len(added) == MAX_MODELS
    assert sum(t.input_tokens for t in added) == MAX_MODELS + 5  # none lost: the rest are "other"
    assert {t.model: t.input_tokens for t in added}["other"] == 6


def test_the_router_adds_a_tasks_tokens_to_its_agents_counters() -> None:
    world = World()
    working(world)
    agent = world.agent(A38)
    earlier = agent.counters.model_copy(update={"tokens": (tokens("gpt-5", 100, 10),)})
    world.registry.put_agent(AgentWrite(agent.model_copy(update={"counters": earlier}), agent.version))
    spent = (tokens("gpt-5", 1, 1), tokens("claude-sonnet-4.5", 5, 5))
    world.send(ended(world, outcome="idle", usage=TaskUsage(tokens=spent, active_seconds=60)))
    assert world.agent(A38).counters.tokens == (tokens("claude-sonnet-4.5", 5, 5), tokens("gpt-5", 101, 11))


def test_the_copilot_adapter_reports_each_model_calls_tokens() -> None:
    seen: list[tuple[str, int, int]] = []
    turns: list[int] = []
    handle = usage_listener(lambda: turns.append(1), lambda m, i, o: seen.append((m, i, o)))

    def event(kind: str, **data: Any) -> Any:
        return SimpleNamespace(type=SessionEventType(kind), data=SimpleNamespace(**data), agent_id=None)

    handle(event("assistant.turn_start"))
    handle(event("assistant.usage", model="claude-sonnet-4.5", input_tokens=1200, output_tokens=80))
    handle(event("assistant.usage", model=None, input_tokens=None, output_tokens=3))
    assert turns == [1]
    assert seen == [("claude-sonnet-4.5", 1200, 80), ("unknown", 0, 3)]


def _spending(world: World, usd_worth_of_sonnet_output: float) -> None:
    """The working agent's task ends having written that many dollars of Sonnet output."""
    millions = usd_worth_of_sonnet_output / 15.0
    spent = (tokens("claude-sonnet-4.5", 0, int(millions * 1_000_000)),)
    world.send(ended(world, outcome="idle", usage=TaskUsage(tokens=spent)))


BUDGET = [
    # (id, earlier spend, this task's spend, escalated?, warned?)
    ("well inside: nothing said", 0.0, 1.0, False, False),
    ("crossing 80%: the issue is told once", 3.0, 6.0, False, True),
    ("past 80% already: not told again", 8.5, 0.5, False, False),
    ("past the limit: handed to humans (fail closed)", 8.0, 2.5, True, False),
]


@pytest.mark.parametrize(
    ("before", "now", "escalated", "warned"), [b[1:] for b in BUDGET], ids=[b[0] for b in BUDGET]
)
def test_an_issues_budget_warns_at_80_percent_and_fails_closed_at_the_limit(
    before: float, now: float, escalated: bool, warned: bool
) -> None:
    world = World(policy=RoutingPolicy(issue_budget_usd=10.0))
    working(world)
    agent = world.agent(A38)
    earlier = (tokens("claude-sonnet-4.5", 0, int(before / 15.0 * 1_000_000)),)
    seeded = agent.counters.model_copy(update={"tokens": earlier})
    world.registry.put_agent(AgentWrite(agent.model_copy(update={"counters": seeded}), agent.version))
    _spending(world, now)
    record = world.agent(A38)
    assert (record.status is AgentStatus.ESCALATED) is escalated
    if escalated:
        assert record.escalation_reason is not None and "budget is spent" in record.escalation_reason
        assert "$10.50 of its $10.00 budget" in record.escalation_reason
    notes = [body for _, number, body, _ in world.github.comments if number == 38 and "budget" in body]
    assert bool([n for n in notes if "at the limit" in n]) is warned


def test_the_budget_and_prices_come_from_the_repositorys_configuration() -> None:
    files = {
        "config.yaml": (
            "issue_budget_usd: 25\n"
            "pricing:\n"
            "  task_usd_per_hour: 0.5\n"
            "  models:\n"
            "    house-*: {input_usd_per_million: 1, output_usd_per_million: 2}\n"
        )
    }
    policy = routing_policy(parse_files(files))
    assert policy.issue_budget_usd == 25
    assert policy.prices.price_of("house-large") == ModelPrice(
        input_usd_per_million=1, output_usd_per_million=2
    )
    assert policy.prices.task_usd_per_hour == 0.5
    assert routing_policy(parse_files({})).issue_budget_usd is None  # no budget unless one is set


REVIEWER = "1-101-pr-review"


def under_review(world: World) -> None:
    """#38's dev agent working, its PR #101 opened (a reviewer starts on it) and begun."""
    working(world)
    world.send(world.events.pr(101, "feat/issue-38", "Closes #38"))
    reviewer = world.agent(REVIEWER)
    begun = reviewer.transition(AgentStatus.ACTIVE, now=world.now)
    world.registry.put_agent(AgentWrite(begun, reviewer.version))


def record_spend(world: World, agent_id: str, usd_of_sonnet_output: float) -> None:
    agent = world.agent(agent_id)
    spent = (tokens("claude-sonnet-4.5", 0, int(usd_of_sonnet_output / 15.0 * 1_000_000)),)
    counters = agent.counters.model_copy(update={"tokens": spent})
    world.registry.put_agent(AgentWrite(agent.model_copy(update={"counters": counters}), agent.version))


def test_a_reviewers_cost_counts_for_the_issue_its_pull_request_serves() -> None:
    world = World()
    under_review(world)
    assert world.agent(REVIEWER).serves_issue == 38
    record_spend(world, A38, 2.0)
    record_spend(world, REVIEWER, 1.0)
    costs = issue_costs(world.registry.agents.values())
    assert list(costs) == [38]  # not a row of its own for PR #101
    own, tree = costs[38]
    assert round(own.total_usd, 2) == round(tree.total_usd, 2) == 3.0


BUDGET_WITH_REVIEWERS = [
    # (id, whose task ends, dev's spend, reviewer's spend, that task's spend, escalated, warned)
    ("the dev's task end counts its reviewer's spend", A38, 6.0, 4.5, 0.0, A38, False),
    ("the reviewer's task end counts the dev's spend", REVIEWER, 6.0, 4.5, 0.0, REVIEWER, False),
    ("crossing 80% together: the issue is told", REVIEWER, 4.0, 3.0, 1.5, None, True),
    ("within 80% together: nothing said", A38, 4.0, 2.0, 1.0, None, False),
]


@pytest.mark.parametrize(
    ("ends", "dev", "reviewer", "spends", "escalated", "warned"),
    [row[1:] for row in BUDGET_WITH_REVIEWERS],
    ids=[row[0] for row in BUDGET_WITH_REVIEWERS],
)
def test_an_issues_budget_counts_the_reviewers_of_its_pull_requests(
    *, ends: str, dev: float, reviewer: float, spends: float, escalated: str | None, warned: bool
) -> None:
    world = World(policy=RoutingPolicy(issue_budget_usd=10.0))
    under_review(world)
    record_spend(world, A38, dev)
    record_spend(world, REVIEWER, reviewer)
    usage = TaskUsage(tokens=(tokens("claude-sonnet-4.5", 0, int(spends / 15.0 * 1_000_000)),))
    world.send(ended(world, ends, outcome="idle", usage=usage))
    for agent_id in (A38, REVIEWER):
        assert (world.agent(agent_id).status is AgentStatus.ESCALATED) is (agent_id == escalated)
    told = [number for _, number, body, _ in world.github.comments if "at the limit its agent" in body]
    assert told == ([38] if warned else [])  # on the issue, whichever agent's task crossed it
