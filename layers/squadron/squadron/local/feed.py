"""What the local stack is doing, as lines a person can follow.

The feed watches three things the way an operator would: the webhooks GitHub (the sandbox) sent,
the agents' records in the registry, and the domain events on the local bus. Each poll yields
the lines that are new since the last one (after a restart, :meth:`Feed.history` says once what
was there before, marked as history, so no old activity is shown as new): a delivery (``issues.opened #1 by octo-human``), an
agent's change of status (``agent 1-1-feat-dev: SLEEPING -> ACTIVE``) or an event
(``event: 12:00:03 agent.slept.v1 octo/repo#1 1-1-feat-dev blocked_by=[2]``). The Lambdas' own JSON logs go to a file in the
state directory; the feed is what ``squadron local`` prints.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from squadron.domain.agents import AgentRecord, AgentStatus

#: The latest events a restart's :meth:`Feed.history` shows (the rest: ``squadron events tail``).
HISTORY_LINES = 10


def describe_delivery(event: str, action: str | None, payload: dict[str, Any]) -> str:
    """One webhook in words: ``pull_request.opened #3 by squadron[bot]``."""
    subject = payload.get("issue") or payload.get("pull_request") or {}
    number = f" #{subject.get('number')}" if subject.get("number") else ""
    who = (payload.get("sender") or {}).get("login")
    return f"{event}{f'.{action}' if action else ''}{number} by {who}"


def describe_agent(agent: AgentRecord, before: AgentStatus | None) -> str:
    """One agent's change in words, with what it waits on when it sleeps."""
    change = f"{before} -> {agent.status}" if before is not None else f"{agent.status}"
    extra = ""
    if agent.status is AgentStatus.SLEEPING and agent.blocked_by:
        extra = " (blocked by " + ", ".join(f"#{n}" for n in sorted(agent.blocked_by)) + ")"
    elif agent.pr_number is not None and agent.status is not AgentStatus.CREATED:
        extra = f" (PR #{agent.pr_number})"
    return f"agent {agent.display_name}: {change}{extra}"


@dataclass
class Feed:
    """Polls the sandbox's deliveries and the registry; :meth:`poll` returns the new lines."""

    deliveries: Callable[[], list[Any]]
    agents: Callable[[], Iterable[AgentRecord]]
    #: The bus's events not shown yet (each once, oldest first), as lines.
    events: Callable[[], list[str]] = list
    _seen_deliveries: int = 0
    _statuses: dict[str, AgentStatus] = field(default_factory=dict)

    def history(self) -> list[str]:
        """What was there before this start (a restart's restored state), said once and marked
        ``history:``: :meth:`poll` then says only what happens from now on, never an old delivery,
        event or agent's status as if it were new. The latest :data:`HISTORY_LINES` events are
        shown; ``squadron events tail --local`` shows them all."""
        deliveries = self.deliveries()
        self._seen_deliveries = len(deliveries)
        agents = list(self.agents())
        for agent in agents:
            self._statuses[agent.agent_id] = agent.status
        events = self.events()
        if not (deliveries or agents or events):
            return []
        statuses = Counter(agent.status for agent in agents)
        now = ", ".join(f"{n} {s.value.lower()}" for s in AgentStatus if (n := statuses.get(s)))
        lines = [
            f"history: before this start: {len(deliveries)} webhook deliveries, {len(events)} domain "
            f"events; agents now: {now or 'none'}"
        ]
        if len(events) > HISTORY_LINES:
            lines.append(
                f"history: ... {len(events) - HISTORY_LINES} earlier events (`squadron events tail --local --since 1w`)"
            )
        lines += [f"history: event: {line}" for line in events[-HISTORY_LINES:]]
        return [*lines, "history: end; what follows is new"]

    def poll(self) -> list[str]:
        lines: list[str] = []
        new = self.deliveries()[self._seen_deliveries :]
        self._seen_deliveries += len(new)
        lines += [f"github: {describe_delivery(d.event, d.action, d.payload)}" for d in new]
        for agent in sorted(self.agents(), key=lambda a: (a.updated_at, a.agent_id)):
            before = self._statuses.get(agent.agent_id)
            if before is not agent.status:
                self._statuses[agent.agent_id] = agent.status
                lines.append(describe_agent(agent, before))
        lines += [f"event: {line}" for line in self.events()]
        return lines


def stack_feed(stack: Any) -> Feed:
    """The feed of a started :class:`~squadron.local.stack.LocalStack`."""
    from squadron.adapters.event_bus import EventLog  # noqa: PLC0415
    from squadron.adapters.registry.agent_listings import DynamoAgentListings  # noqa: PLC0415

    registry = DynamoAgentListings(stack.resources.table_name)  # the one port it reads

    def agents() -> list[AgentRecord]:
        return [a for status in AgentStatus for a in registry.agents_with_status(status)]

    def deliveries() -> list[Any]:  # real GitHub's are not ours to list: only the agents show
        return list(stack.sandbox.deliveries) if stack.sandbox is not None else []

    log, seen = EventLog(stack.resources.event_log_group), set[str]()

    def events() -> list[str]:
        return [event.line() for event in log.read(0, seen)]

    return Feed(deliveries=deliveries, agents=agents, events=events)
