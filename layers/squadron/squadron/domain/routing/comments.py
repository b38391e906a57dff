"""Comments on issues and pull requests: to the agents they concern, by the one authority rule."""

from __future__ import annotations

from collections.abc import Mapping

from squadron.domain.agents import (
    HELD_RETENTION,
    TERMINAL,
    AgentRecord,
    InboxItem,
    IssueState,
    RoleKind,
    agent_id_for,
)
from squadron.domain.effects import (
    DeliverInbox,
    Discard,
    Effect,
)
from squadron.domain.events import (
    EventEnvelope,
)
from squadron.domain.routing.builders import dev_agent_for_pr, notify_agent, pm_effects
from squadron.domain.routing.normalize import normalize_comment
from squadron.domain.routing.policy import RoutingPolicy
from squadron.domain.routing.snapshot import Handler, Snapshot
from squadron.domain.routing.steering import agent_roles


def _on_comment(event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy) -> list[Effect]:
    comment = normalize_comment(event)
    if comment is None:
        return [Discard(f"{event.event}.{event.action} has no comment")]
    who = comment.author.login  # route() let it through: its author has authority
    summary = f"{who} commented on #{comment.number}"
    if policy.mentions_pm(comment.body):
        return pm_effects(event, snap, policy, "comment", summary, body=comment.body)
    if comment.on_pull_request:
        agent = dev_agent_for_pr(event, snap, policy, comment.number)
    else:
        agent = snap.view(comment.number).agent_of_kind(RoleKind.DEV)
        if agent is None or agent.status in TERMINAL:
            held = held_for_stage_agents(
                event,
                policy,
                comment.number,
                agent,
                closed=snap.view(comment.number).state is IssueState.CLOSED,
                summary=summary,
                body=comment.body,
                url=comment.url,
            )
            if held:
                return held
    return notify_agent(agent, event, snap, "comment", summary, wake=True, body=comment.body, url=comment.url)


def held_for_stage_agents(
    event: EventEnvelope,
    policy: RoutingPolicy,
    number: int,
    agent: AgentRecord | None,
    *,
    closed: bool,
    summary: str,
    body: str,
    url: str | None,
) -> list[Effect]:
    """A writer's comment on an issue whose dev agent a pipeline stage has not started (yet), under
    ``orchestration: pipelines``: kept in the inbox of each agent the configured pipelines' agent
    stages would start on the issue as its dev (the agent id is the role's and the issue's), with
    the comment's time, so the agent a stage starts finds it there once it exists — the run's
    trigger started its generation, so a comment after the trigger reaches it and one before
    reaches none (:func:`squadron.domain.agents.reaches`). Stored once (a redelivery, an edit of
    the same delivery: the inbox keys an item by delivery and kind); only a comment the authority
    rule passed gets here (a stranger's is refused before any route). None under ``fixed``: the
    assignment started its agent already, nor on a closed issue (a run that starts there starts
    later, at its reopening or assignment). An item no stage came for is dropped after
    :data:`~squadron.domain.agents.HELD_RETENTION` (its TTL)."""
    if policy.orchestration != "pipelines" or closed:
        return []
    roles = sorted(
        {
            role
            for pipeline in policy.pipelines.values()
            for role in agent_roles(pipeline)
            if policy.role_kinds.get(role) is RoleKind.DEV
        }
    )
    held: list[Effect] = [
        DeliverInbox(
            InboxItem(
                agent_id=agent_id_for(event.repository.id, role, number),
                delivery_id=event.delivery_id,
                received_at=event.received_at,
                occurred_at=event.occurred_at or event.received_at,
                expires_at=event.received_at + HELD_RETENTION,
                kind="comment",
                summary=summary,
                actor=event.sender.login,
                url=url,
                body=body,
            )
        )
        for role in roles
    ]
    if not held:
        return []
    whose = "no dev agent yet" if agent is None else f"its dev agent {agent.agent_id} is {agent.status}"
    return [*held, Discard(f"#{number}: {whose}; kept for the agent a pipeline stage starts: {summary}")]


COMMENT_ROUTES: Mapping[tuple[str, str | None], Handler] = {
    ("issue_comment", "created"): _on_comment,
    ("issue_comment", "edited"): _on_comment,
    ("pull_request_review_comment", "created"): _on_comment,
}
