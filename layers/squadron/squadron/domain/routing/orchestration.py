"""What the fixed routing leaves to a pipeline run under ``orchestration: pipelines`` — pure
(docs/pipelines.md, "Default pipelines").

The rule: when an event starts a pipeline run (a :class:`~squadron.domain.effects.StartPipelineRun`
of this decision), the fixed routing's *work* for that event is left to the run: starting, waking
or telling an agent (:class:`PutAgent`, :class:`LaunchAgent`, :class:`DeliverInbox`,
:class:`StopAgentTask`) and judging a merge (:class:`EvaluateMerge`). Its *bookkeeping* stays
(vouching, assignment and issue state, pull request links, blockers, reviews recorded,
comments), so the registry knows the issue as it does today. An event that starts no run (no
pipeline's trigger matches, or nobody with write access vouched for it: a stranger's issue) is
routed as today. Under ``orchestration: fixed`` nothing changes: runs start beside the routing.

The PM's assignment: the PM assigns the App through the agent gateway (GitHub's own webhook of
the App's act never reaches the router), and only webhooks start runs. Under ``pipelines`` the
PM's assignment (:func:`pm_assignment`) starts the issue's runs too, under the rule the fixed
routing starts the dev agent by: the issue must be vouched for by a writer (the PM's word never
vouches; :func:`squadron.domain.routing.pipelines.vouched` reads the issue's vouch).
"""

from __future__ import annotations

from collections.abc import Sequence

from squadron.domain.agents import agent_id_for
from squadron.domain.effects import (
    DeliverInbox,
    Discard,
    Effect,
    EvaluateMerge,
    LaunchAgent,
    PutAgent,
    StartPipelineRun,
    StopAgentTask,
)
from squadron.domain.events import EventEnvelope
from squadron.domain.routing.policy import RoutingPolicy

#: The fixed routing's work a started run takes over.
WORK = (PutAgent, LaunchAgent, DeliverInbox, StopAgentTask, EvaluateMerge)


def handed_over(handled: Sequence[Effect], starts: Sequence[Effect], policy: RoutingPolicy) -> list[Effect]:
    """``handled`` (the fixed handler's effects) without the work the started runs take over, and a
    :class:`Discard` naming them; ``handled`` itself when no run starts or under ``fixed``."""
    runs = sorted({e.pipeline for e in starts if isinstance(e, StartPipelineRun)})
    if policy.orchestration != "pipelines" or not runs:
        return list(handled)
    kept: list[Effect] = [effect for effect in handled if not isinstance(effect, WORK)]
    if len(kept) == len(handled):
        return kept
    return [*kept, Discard(f"left to pipeline run(s) {', '.join(runs)} (orchestration: pipelines)")]


def pm_assignment(event: EventEnvelope, policy: RoutingPolicy) -> bool:
    """Whether ``event`` (as :func:`~squadron.domain.routing.normalize.as_webhook` has it) is the
    repository's PM assigning the App to an issue, under ``orchestration: pipelines``: it may start
    the runs that event triggers when a writer vouched for the issue."""
    return (
        policy.orchestration == "pipelines"
        and event.origin == "agent"
        and event.command is None
        and (event.event, event.action) == ("issues", "assigned")
        and event.source_agent == agent_id_for(event.repository.id, policy.pm_role, None)
    )
