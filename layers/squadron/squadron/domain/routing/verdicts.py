"""What the router does with the merge gate's judgement of a pull request — pure.

The router asks the gate to judge (:func:`gate_arguments`: the merge queue's part only when there
is one), then reports a change of its verdict once (:func:`verdict_choice`): the same verdict
stores at most what it waits for now (the dashboard shows it); a new one is a
``merge_gate.verdict_changed`` domain event keyed by the effect and the verdict, stored only if
the verdict is still the one read (another judgement may have moved it meanwhile).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from squadron.domain.domain_events import (
    DomainEvent,
    MergeGateVerdictChanged,
    Repository,
    gate_event_id,
    make_event,
)
from squadron.domain.effects import EvaluateMerge

#: What a squadron/merge status may say (GitHub's bound on a status description).
DESCRIPTION_MAX = 140


@dataclass(frozen=True)
class KeepVerdict:
    """The same verdict, saying the same: nothing to store."""

    kind: Literal["keep"] = "keep"


@dataclass(frozen=True)
class Redescribe:
    """The same verdict, waiting for something else now: store what it says (no event)."""

    verdict: str
    description: str
    kind: Literal["redescribe"] = "redescribe"


@dataclass(frozen=True)
class ChangeVerdict:
    """A new verdict: store ``event`` if the verdict is still ``previous``."""

    previous: str | None
    event: DomainEvent
    kind: Literal["change"] = "change"


VerdictChoice = KeepVerdict | Redescribe | ChangeVerdict


def gate_arguments(effect: EvaluateMerge) -> dict[str, Any]:
    """The merge queue's part of a judgement (only when there is one: a gate without it still works)."""
    args: dict[str, Any] = {}
    if effect.merge_group:
        args["merge_group"] = effect.merge_group
    if effect.queue_merged:
        args["queue_merged"] = True
    return args


def verdict_choice(
    effect: EvaluateMerge,
    *,
    repo_id: int,
    key: str,
    verdict: str,
    text: str,
    previous: str | None,
    said: str,
    at: datetime,
    correlation_id: str,
) -> VerdictChoice:
    """What to store of the gate's ``verdict`` (saying ``text``) on ``effect``'s pull request,
    given the stored ``previous`` verdict and what it ``said``; ``key`` is the effect's key."""
    description = text[:DESCRIPTION_MAX]
    if previous == verdict:
        return KeepVerdict() if said == description else Redescribe(verdict, description)
    data = MergeGateVerdictChanged.model_validate(
        {"pr_number": effect.pr_number, "verdict": verdict, "previous": previous, "description": description}
    )
    event = make_event(
        data,
        event_id=gate_event_id(key, verdict),
        at=at,
        repository=Repository(id=repo_id, full_name=effect.repo_full_name),
        correlation_id=correlation_id,
        installation=effect.installation_id,
        issue=effect.issue_number,
    )
    return ChangeVerdict(previous, event)
