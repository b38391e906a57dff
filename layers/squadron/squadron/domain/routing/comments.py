"""Comments on issues and pull requests: to the agents they concern, by the one authority rule."""

from __future__ import annotations

from collections.abc import Mapping

from squadron.domain.agents import (
    RoleKind,
)
from squadron.domain.effects import (
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
    return notify_agent(agent, event, snap, "comment", summary, wake=True, body=comment.body, url=comment.url)


COMMENT_ROUTES: Mapping[tuple[str, str | None], Handler] = {
    ("issue_comment", "created"): _on_comment,
    ("issue_comment", "edited"): _on_comment,
    ("pull_request_review_comment", "created"): _on_comment,
}
