"""Which events steer a running pipeline — pure (docs/pipelines.md, "Reactive handlers at run time").

An event whose name (``pull_request.synchronize``) is a key of a configured pipeline's
``on_events`` may reach the runs of its issue or pull request. The trust rule is the one that
starts runs (:func:`squadron.domain.routing.pipelines.vouched`): a webhook from GitHub (never a
command, an agent's report or the reconciler's replay), that a person with write access sent or
that is about an issue a writer vouched for; and the App's own acts (what its agents do through
it) never steer a run. A stranger's event steers nothing.

What a vouched event does:

* :class:`~squadron.domain.effects.SteerPipelineRuns`, carried out from the outbox: each
  recorded run of the subject is read from Step Functions and its own version's handler applied
  (:func:`squadron.domain.pipelines.reactions.reaction`: cancel, invalidate and restart,
  re-evaluate gates, notify); it carries the event's facts (:func:`trigger_data`, from this
  webhook), which a run it restarts gets as its ``trigger``;
* for a ``wake_agent`` handler, the issue's agents of the roles the pipeline's agent stages name
  are woken here, through the router's wake path (an inbox item, then a launch), since the
  issue's agents are what this decision reads.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from squadron.domain.app_acts import is_app
from squadron.domain.effects import Discard, Effect, SteerPipelineRuns, agent_writes
from squadron.domain.events import EventEnvelope
from squadron.domain.pipelines.models import AgentBranch, AgentStage, ParallelStage, Pipeline, WakeAgent
from squadron.domain.pipelines.reactions import could_steer
from squadron.domain.pipelines.triggers import event_name, subject
from squadron.domain.routing.builders import notify_agent
from squadron.domain.routing.pipelines import trigger_data, vouched
from squadron.domain.routing.policy import RoutingPolicy
from squadron.domain.routing.snapshot import Snapshot


def agent_roles(pipeline: Pipeline) -> frozenset[str]:
    """The roles ``pipeline``'s agent stages and agent branches name."""
    roles: set[str] = set()
    for stage in pipeline.stages:
        if isinstance(stage, AgentStage):
            roles.add(stage.agent)
        elif isinstance(stage, ParallelStage):
            roles.update(b.agent for b in stage.branches if isinstance(b, AgentBranch))
    return frozenset(roles)


def steers(event: EventEnvelope, policy: RoutingPolicy) -> bool:
    """Whether ``event`` may steer a run at all: a webhook of GitHub's, not sent by the App, that
    a configured pipeline handles (what the snapshot reads the sender's permission for)."""
    return (
        event.origin == "github"
        and event.command is None
        and not is_app(event.sender.login, policy.bot_login)
        and could_steer(policy.pipelines, event_name(event))
    )


def pipeline_steering(
    event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy, effects: Sequence[Effect]
) -> list[Effect]:
    """A :class:`SteerPipelineRuns` (and the wakes of ``wake_agent``) when ``event`` may steer
    its subject's runs; a :class:`Discard` saying why not when a pipeline handles it but the trust
    rule refuses it; nothing when no pipeline handles it."""
    name = event_name(event)
    if not could_steer(policy.pipelines, name):
        return []
    if event.origin != "github" or event.command is not None:
        return [Discard(f"{name}: only GitHub's webhooks steer a pipeline run")]
    if is_app(event.sender.login, policy.bot_login):
        return [Discard(f"{name}: the App's own acts steer no pipeline run")]
    by = vouched(event, snap, policy, effects)
    number = subject(event)
    if by is None:
        where = f"#{number}" if number is not None else "the repository"
        return [Discard(f"{name}: no one with write access vouched for {where}; no pipeline run is steered")]
    steered: list[Effect] = [
        SteerPipelineRuns(
            repo_id=event.repository.id,
            repo_full_name=event.repository.full_name,
            installation_id=event.installation_id,
            number=number,
            event=name,
            delivery=event.delivery_id,
            by=by,
            trigger=trigger_data(event, number),
        )
    ]
    return steered + _wakes(event, snap, policy, [*effects, *steered], number)


def _wakes(
    event: EventEnvelope, snap: Snapshot, policy: RoutingPolicy, effects: Sequence[Effect], number: int | None
) -> list[Effect]:
    """``wake_agent``: the subject's (and its linked issue's) agents of the roles the handling
    pipelines' agent stages name, each told and woken once (an agent this decision writes already
    is left to what wrote it)."""
    name = event_name(event)
    roles: set[str] = set()
    context: dict[str, object] = {}
    for pipeline in policy.pipelines.values():
        handler = pipeline.on_events.get(name)
        if isinstance(handler, WakeAgent):
            roles |= agent_roles(pipeline)
            context.update(handler.context)
    if not roles or number is None:
        return []
    view = snap.view(number)
    views = [view] + ([snap.view(view.linked_issue)] if view.linked_issue is not None else [])
    written = {write.record.agent_id for write in agent_writes(effects)}
    woken: list[Effect] = []
    for agent in (a for v in views for a in v.agents):
        if agent.role not in roles:
            continue
        summary = f"{name} on #{number} reached a pipeline that wakes you (wake_agent){_told(context)}"
        if agent.agent_id in written:
            # woken by what wrote it; the handler's context is still told (its own inbox item)
            if context:
                woken += notify_agent(agent, event, snap, "pipeline_event", summary, wake=False)
            continue
        written.add(agent.agent_id)
        woken += notify_agent(agent, event, snap, "pipeline_event", summary, wake=True)
    return woken


#: The most characters of a ``wake_agent`` handler's context told to the agent.
MAX_WAKE_CONTEXT = 2_000


def _told(context: dict[str, object]) -> str:
    """The waking handlers' ``context`` as the agent is told it: JSON, as the repository's
    default-branch configuration (a writer's) says it; no run is read here, so a template in it
    is told as written."""
    if not context:
        return ""
    said = json.dumps(context, sort_keys=True, default=str)
    if len(said) > MAX_WAKE_CONTEXT:
        said = said[:MAX_WAKE_CONTEXT] + "..."
    return f"; context: {said}"
