"""What an issue has spent against its budget (``issue_budget_usd``) — pure.

One figure for the two places that judge the budget: the router when a task ends
(:mod:`squadron.domain.routing.commands`) and the task's model gateway before each model call
(through the agent gateway's ``issue_spend``, :mod:`squadron.shell.gateway.task`). An issue costs
what the agents working on it cost: the agents of its number and the reviewers of its pull
requests (a reviewer's cost counts for the issue its PR serves, :attr:`AgentRecord.costed_issue`).
Each agent counts

* its recorded counters (what its ended tasks used, added by the router), and
* while a task of it runs, what that task has spent so far as its host last reported it
  (:class:`LiveSpend`, kept in the issue's partition by the agent gateway). A report counts only
  while it belongs to the agent's current launch and that launch has not ended (its secret is
  still set): once the router records the task's end its usage is in the counters, and a report
  of a replaced or crashed launch is ignored.

Guarantee and its bound (docs/security.md, "What remains"): every host reports its task's spend
and reads the others' before each model call it admits, so a call is admitted against every
other agent's spend up to that agent's own last admission. What a call costs is known only once
it is answered, so the issue's agents together overspend the budget by at most the calls in
flight when it is crossed: per agent running at the time, the calls it had admitted and not yet
reported (one for the Copilot CLI, which calls one at a time; at most the model gateway's
``MAX_CONCURRENT`` for a shell calling it in parallel).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from squadron.domain.agents import AgentRecord
from squadron.domain.cost import Cost, PriceTable, cost_of
from squadron.domain.usage import ModelTokens

if TYPE_CHECKING:
    from squadron.domain.routing.snapshot import IssueView


@dataclass(frozen=True)
class LiveSpend:
    """What one running task of an agent has spent so far, as its host last reported it."""

    agent_id: str
    launch_token: str
    tokens: tuple[ModelTokens, ...] = ()
    active_seconds: int = 0
    at: datetime | None = None


def live_counts(agent: AgentRecord, live: LiveSpend | None) -> bool:
    """Whether ``live`` is what ``agent``'s running task has spent (not an ended or replaced one)."""
    return (
        live is not None
        and live.agent_id == agent.agent_id
        and live.launch_token == agent.launch_token
        and agent.launch_secret_hash is not None
    )


def agent_spend(agent: AgentRecord, live: LiveSpend | None, prices: PriceTable) -> Cost:
    """What ``agent`` has cost: its counters, and its running task's report when it counts."""
    recorded = cost_of(agent.counters.tokens, agent.counters.active_seconds, prices)
    if live is None or not live_counts(agent, live):
        return recorded
    return recorded + cost_of(live.tokens, live.active_seconds, prices)


def issue_agents(issue: int, view: IssueView, pr_views: Iterable[IssueView]) -> dict[str, AgentRecord]:
    """The agents whose cost counts for ``issue``: its own, and its pull requests' reviewers."""
    working = {a.agent_id: a for a in view.agents}
    for pr in sorted(pr_views, key=lambda v: v.number):
        working.update({a.agent_id: a for a in pr.agents if a.costed_issue == issue})
    return working


def issue_spend(
    issue: int,
    view: IssueView,
    pr_views: Iterable[IssueView],
    prices: PriceTable,
    *,
    excluding: str | None = None,
) -> Cost:
    """What ``issue``'s agents have cost (recorded and live), but the agent ``excluding``."""
    live: Mapping[str, LiveSpend] = view.live
    return sum(
        (
            agent_spend(agent, live.get(agent_id), prices)
            for agent_id, agent in sorted(issue_agents(issue, view, pr_views).items())
            if agent_id != excluding
        ),
        Cost(),
    )
