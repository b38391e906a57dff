"""Routing: the composed table and :func:`route`."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from squadron.domain import lifecycle
from squadron.domain.agents import (
    LIVE,
)
from squadron.domain.authority import judge, refusal
from squadron.domain.change_set_commands import change_set_command
from squadron.domain.effects import (
    AddBlocker,
    Discard,
    Effect,
    LaunchAgent,
    LinkPullRequest,
    PutAgent,
    RemoveBlocker,
)
from squadron.domain.events import EventEnvelope
from squadron.domain.routed import ROUTED_EVENTS
from squadron.domain.routing.ci import CI_ROUTES
from squadron.domain.routing.commands import COMMAND_ROUTES, agent_envelope_problem
from squadron.domain.routing.comments import COMMENT_ROUTES
from squadron.domain.routing.issues import ISSUE_ROUTES, refused_ticks
from squadron.domain.routing.merge_queue import MERGE_QUEUE_ROUTES
from squadron.domain.routing.normalize import as_webhook
from squadron.domain.routing.orchestration import handed_over
from squadron.domain.routing.pipelines import pipeline_starts
from squadron.domain.routing.policy import RoutingPolicy
from squadron.domain.routing.pull_requests import PULL_REQUEST_ROUTES
from squadron.domain.routing.snapshot import Handler, Snapshot
from squadron.domain.routing.steering import pipeline_steering


def compose(*tables: Mapping[tuple[str, str | None], Handler]) -> Mapping[tuple[str, str | None], Handler]:
    """One table from each topic's; an (event, action) routed by two topics is a programming error."""
    composed: dict[tuple[str, str | None], Handler] = {}
    for table in tables:
        twice = composed.keys() & table.keys()
        if twice:
            raise ValueError(f"routed twice: {sorted(twice, key=str)}")
        composed.update(table)
    return MappingProxyType(composed)


#: Every (event, action) the router handles, composed from each topic's table.
ROUTES: Mapping[tuple[str, str | None], Handler] = compose(
    ISSUE_ROUTES, COMMENT_ROUTES, PULL_REQUEST_ROUTES, CI_ROUTES, COMMAND_ROUTES, MERGE_QUEUE_ROUTES
)


def _heal_pending_launches(snap: Snapshot, effects: list[Effect]) -> list[Effect]:
    """Re-launch agents whose launch was decided but never confirmed (a half-failed earlier attempt)."""
    touched = {e.agent_id for e in effects if isinstance(e, LaunchAgent)}
    touched |= {e.write.record.agent_id for e in effects if isinstance(e, PutAgent)}
    touched |= {
        e.agent.record.agent_id
        for e in effects
        if isinstance(e, (AddBlocker, RemoveBlocker, LinkPullRequest)) and e.agent is not None
    }
    return [
        lifecycle.launch(agent, agent.wake_reason or "resume an unconfirmed launch")
        for agent in snap.agents()
        if agent.pending_launch and agent.status in LIVE and agent.agent_id not in touched
    ]


def route(event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy) -> list[Effect]:
    """Every effect of ``event`` given ``snap``; at least one (a Discard says why nothing happens)."""
    refused = agent_envelope_problem(event)
    if refused is not None:
        return [Discard(f"refused: {refused}")]
    event = as_webhook(event, policy.bot_login)
    # A change-set command is a command, never a message: it reaches no agent, whoever wrote it
    # (the desk asks GitHub who may approve each repository: docs/change-sets.md).
    commanded = change_set_command(event, bot_login=policy.bot_login, permissions=snap.permissions)
    if commanded is not None:
        return [*commanded, *_heal_pending_launches(snap, [])]
    judged = judge(event, bot_login=policy.bot_login, permissions=snap.permissions)
    if judged is not None and not judged[1].authorised:
        # One authority rule for every human input (domain.authority): nothing of the input's
        # own happens (no inbox item, wake, counted round or judgement) and nothing is posted
        # back, but for a note on the dashboard when a person's tick there is refused. A launch
        # an earlier event decided and never confirmed is still finished.
        found, verdict = judged
        return [
            Discard(refusal(found, verdict), rule=verdict.rule),
            *refused_ticks(event, policy, verdict),
            *_heal_pending_launches(snap, []),
        ]
    handler = ROUTES.get((event.event, event.action)) or ROUTES.get((event.event, None))
    if handler is None:
        return [Discard(f"no route for {event.event}.{event.action}")]
    handled = handler(event, snap, policy)
    starts = pipeline_starts(event, snap, policy, handled)
    effects = handed_over(handled, starts, policy) + starts
    effects += pipeline_steering(event, snap, policy, effects)
    effects += _heal_pending_launches(snap, effects)
    return effects or [Discard(f"{event.event}.{event.action}: nothing to do")]


def routed_pairs() -> frozenset[tuple[str, str | None]]:
    """The (event, action) pairs the ingress forwards — for the consistency test with :data:`ROUTES`."""
    pairs: set[tuple[str, str | None]] = set()
    for event, actions in ROUTED_EVENTS.items():
        if actions is None:
            pairs.add((event, None))
        else:
            pairs.update((event, action) for action in actions)
    return frozenset(pairs)
