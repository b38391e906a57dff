"""An issue's spend as the router's task-end check and the task's model gateway both judge it:
its agents' recorded counters and their running tasks' last reports (tables of cases)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from squadron.domain.agents import AgentRecord, AgentStatus
from squadron.domain.commands import TaskUsage
from squadron.domain.cost import PriceTable
from squadron.domain.issue_budget import LiveSpend, agent_spend, issue_spend
from squadron.domain.routing import IssueView, RoutingPolicy
from squadron.domain.usage import ModelTokens
from tests.support.world import World
from tests.unit.test_cost import REVIEWER, record_spend, under_review
from tests.unit.test_task_ended_routing import A38, ended

#: A dollar a million tokens either way, no task time: a token count reads as micro-dollars.
PRICES = PriceTable(
    models={"m": {"input_usd_per_million": 1.0, "output_usd_per_million": 1.0}}, task_usd_per_hour=0
)


def _usd_of(million_tokens: float) -> tuple[ModelTokens, ...]:
    return (ModelTokens(model="m", output_tokens=int(million_tokens * 1_000_000)),)


def _agent(world: World, agent_id: str, recorded: float) -> AgentRecord:
    agent = world.agent(agent_id)
    return agent.model_copy(
        update={"counters": agent.counters.model_copy(update={"tokens": _usd_of(recorded)})}
    )


def _report(agent: AgentRecord, usd: float, **changed: str) -> LiveSpend:
    return LiveSpend(
        agent_id=changed.get("agent_id", agent.agent_id),
        launch_token=changed.get("launch_token", agent.launch_token),
        tokens=_usd_of(usd),
    )


AGENT_SPEND: list[
    tuple[str, Callable[[AgentRecord], AgentRecord], Callable[[AgentRecord], LiveSpend | None], float]
] = [
    # (id, the agent as the registry has it, its report, what it has cost)
    ("recorded only: no task running", lambda a: a, lambda a: None, 2.0),
    ("its running task's report is added", lambda a: a, lambda a: _report(a, 0.5), 2.5),
    (
        "a report of a replaced launch counts nothing",
        lambda a: a,
        lambda a: _report(a, 0.5, launch_token="1-38-feat-dev-g1-l0"),
        2.0,
    ),
    (
        "a report once the task's end is routed counts nothing (its usage is in the counters)",
        lambda a: a.model_copy(update={"launch_secret_hash": None}),
        lambda a: _report(a, 0.5),
        2.0,
    ),
    ("another agent's report counts nothing", lambda a: a, lambda a: _report(a, 0.5, agent_id=REVIEWER), 2.0),
]


@pytest.mark.parametrize(
    ("state", "report", "usd"), [c[1:] for c in AGENT_SPEND], ids=[c[0] for c in AGENT_SPEND]
)
def test_what_an_agent_has_cost(
    state: Callable[[AgentRecord], AgentRecord], report: Callable[[AgentRecord], LiveSpend | None], usd: float
) -> None:
    world = World()
    under_review(world)
    agent = state(_agent(world, A38, 2.0))
    assert agent_spend(agent, report(agent), PRICES).total_usd == pytest.approx(usd)


def test_an_issue_counts_its_reviewers_and_their_running_tasks_but_not_the_asker() -> None:
    world = World()
    under_review(world)
    dev, reviewer = _agent(world, A38, 2.0), _agent(world, REVIEWER, 1.0)
    stranger = reviewer.model_copy(update={"agent_id": "1-102-pr-review", "serves_issue": 39})
    prs = [
        IssueView(101, agents=(reviewer,)),
        IssueView(102, agents=(stranger,)),  # another issue's reviewer on a PR linked here: not counted
    ]
    view = IssueView(
        38,
        agents=(dev,),
        pull_requests=frozenset({101, 102}),
        live={A38: _report(dev, 0.25), REVIEWER: _report(reviewer, 0.5)},
    )
    assert issue_spend(38, view, prs, PRICES).total_usd == pytest.approx(3.75)
    assert issue_spend(38, view, prs, PRICES, excluding=REVIEWER).total_usd == pytest.approx(2.25)
    assert issue_spend(38, view, prs, PRICES, excluding=A38).total_usd == pytest.approx(1.5)


ROUTED: list[tuple[str, str, float, float, bool, str | None]] = [
    # (id, whose task ends, its task's spend, the other's running task's report, the report is the
    #  other's current launch, who is escalated) with $6 recorded for the dev, $2 for the reviewer,
    #  a $10 budget: what the model gateway admitted by, the router's task-end check escalates by
    ("the dev's running task counts at the reviewer's end", REVIEWER, 1.0, 1.5, True, REVIEWER),
    ("the reviewer's running task counts at the dev's end", A38, 1.0, 1.5, True, A38),
    ("a replaced launch's report does not", REVIEWER, 1.0, 1.5, False, None),
    ("within the budget with the report: nobody", REVIEWER, 0.5, 1.0, True, None),
]


@pytest.mark.parametrize(
    ("ends", "spends", "reported", "current", "escalated"),
    [c[1:] for c in ROUTED],
    ids=[c[0] for c in ROUTED],
)
def test_the_routers_task_end_check_counts_the_others_running_tasks(
    *, ends: str, spends: float, reported: float, current: bool, escalated: str | None
) -> None:
    world = World(policy=RoutingPolicy(issue_budget_usd=10.0))
    under_review(world)
    record_spend(world, A38, 6.0)
    record_spend(world, REVIEWER, 2.0)
    other = world.agent(REVIEWER if ends == A38 else A38)
    sonnet_output = (ModelTokens(model="claude-sonnet-4.5", output_tokens=int(reported / 15.0 * 1_000_000)),)
    token = other.launch_token if current else f"{other.agent_id}-g1-l0"
    world.registry.record_live_spend(1, 38, LiveSpend(other.agent_id, token, sonnet_output))
    usage = TaskUsage(
        tokens=(ModelTokens(model="claude-sonnet-4.5", output_tokens=int(spends / 15.0 * 1_000_000)),)
    )
    world.send(ended(world, ends, outcome="idle", usage=usage))
    for agent_id in (A38, REVIEWER):
        assert (world.agent(agent_id).status is AgentStatus.ESCALATED) is (agent_id == escalated)
    if escalated is not None:
        reason = world.agent(escalated).escalation_reason
        assert reason is not None and reason.startswith("the issue's budget is spent: $10.50 of its $10.00")
