"""When a pipeline's trigger matches an event — pure (docs/pipelines.md, "When a run starts").

A pipeline with a ``trigger`` starts a run when an event is its ``event`` (``issues.labeled``:
the webhook's event and action) and meets each of its ``conditions``; a condition matches only
what it names (``label``: the label the event just added; ``base_branch``: the pull request's
base branch), so an event without that field meets none. Who may start a run is the router's
rule (:mod:`squadron.domain.routing.pipelines`).
"""

from __future__ import annotations

from collections.abc import Mapping

from squadron.domain.events import EventEnvelope
from squadron.domain.pipelines.models import Pipeline, Trigger


def event_name(event: EventEnvelope) -> str:
    """``event.action`` as a trigger names it (``issues.labeled``; ``status`` has no action)."""
    return f"{event.event}.{event.action}" if event.action else event.event


def subject(event: EventEnvelope) -> int | None:
    """The issue or pull request a run started by ``event`` follows (None: the repository)."""
    if event.pull_request is not None:
        return event.pull_request.number
    if event.issue is not None:
        return event.issue.number
    if event.check is not None and len(event.check.pull_request_numbers) == 1:
        return event.check.pull_request_numbers[0]
    return None


def matches(trigger: Trigger, event: EventEnvelope) -> bool:
    """Whether ``event`` is ``trigger``'s event and meets each condition it names."""
    if trigger.event != event_name(event):
        return False
    wanted = trigger.conditions
    if wanted.label is not None and (event.label is None or event.label != wanted.label):
        return False
    return not (
        wanted.base_branch is not None
        and (event.pull_request is None or event.pull_request.base_ref != wanted.base_branch)
    )


def triggered(pipelines: Mapping[str, Pipeline], event: EventEnvelope) -> list[str]:
    """The names of the pipelines ``event`` triggers, sorted (sub-pipelines never: no trigger)."""
    return sorted(
        name
        for name, pipeline in pipelines.items()
        if pipeline.trigger is not None and matches(pipeline.trigger, event)
    )


def could_start(pipelines: Mapping[str, Pipeline], event: EventEnvelope) -> bool:
    """Whether ``event`` may start a run at all (what the snapshot reads the sender's permission for)."""
    return event.origin == "github" and event.command is None and bool(triggered(pipelines, event))
