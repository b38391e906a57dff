"""When a repository's dashboard issue is rendered again: on its domain events, at most once a
minute (pure rules; :mod:`squadron.shell.dashboards` applies them).

Every domain event of a repository asks for a refresh of its dashboard (an EventBridge rule on
the bus puts each on the dashboards queue); the reconciler's tick asks for each repository with
agents too (a sweep: level-triggered, for what no event reports, such as a merge gate whose
reasons moved while its verdict stood). Requests are debounced per repository by one item in
the registry, the repository's *slot*:

- a request *claims* the slot when the last rendering is at least :data:`REFRESH_INTERVAL` old
  (one conditional write: two claims within the interval are impossible, whichever Lambda
  makes them) and renders; the claim is made before the registry is read, so every change
  committed before the claim is in the rendering. A rendering that writes nothing (nothing it
  shows changed, no issue to edit yet) *releases* the claim (one more conditional write puts
  the slot back as it was): only edits spend a minute, so a change that comes right after a
  sweep that found nothing to do is still shown at once;
- a request that finds the slot taken (rendered less than the interval ago) *defers*: the
  first one since that rendering marks the slot and puts one delayed request on the queue, due
  when the interval ends; later ones see the mark and do nothing (the deferred rendering reads
  the registry after them, so it shows their changes). A deferred request that comes early
  (clocks differ) defers again.

Only the sweep opens a repository's issue; events edit it (see :data:`Cause`).

So a burst of events is one edit at its start and one a minute later with all of it, a change
after a quiet minute is shown at once, and no repository's issue is edited more than once per
interval. Renderings never overlap (the dashboards Lambda's timeout is under the interval), so
an older rendering can never overwrite a newer one. A rendering that fails leaves its request on the queue (retried, then dead-lettered
with an alarm); the next sweep renders anyway.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from squadron.domain.domain_events import SOURCE, Repository
from squadron.errors import SquadronError

#: The events that ask for a refresh (the bus's rule to the dashboards queue): every Squadron
#: event of a repository. Each shows on the dashboard (an agent's status, a blocker, a PR, a
#: verdict, its cost) or costs one claim at most.
DASHBOARD_EVENTS: Mapping[str, Any] = {
    "source": [SOURCE],
    "detail": {"repository": {"id": [{"exists": True}]}},
}
#: The shortest time between two renderings of one repository's dashboard.
REFRESH_INTERVAL = timedelta(seconds=60)
#: SQS delays a message at most this long (a deferral is never longer than the interval).
MAX_DELAY_SECONDS = 900

#: Why a rendering is asked: a domain event (it edits the issue), or the reconciler's sweep (it
#: also opens the issue where there is none: a repository's dashboard appears on a tick, so a
#: burst of events never interleaves an issue of Squadron's with the issues it is opening).
Cause = Literal["event", "sweep"]


class RefreshRequestError(SquadronError):
    """A message on the dashboards queue that is no refresh request (said precisely)."""


class RefreshRequest(BaseModel):
    """Render ``repository``'s dashboard again (``cause``: why it is asked)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    repository: Repository
    installation: int | None = Field(default=None, ge=1)
    cause: Cause = "event"
    #: Queued by a rendering that found the slot taken: due when its minute is over.
    deferred: bool = False
    #: The domain event that asked (a bus event), for the logs.
    event_id: str | None = Field(default=None, max_length=64)

    @property
    def opens(self) -> bool:
        """Whether this rendering may open the repository's issue (a sweep's may)."""
        return self.cause == "sweep"

    def message(self) -> str:
        return self.model_dump_json(exclude_none=True)


class _BusDetail(BaseModel):
    """What a refresh needs of a domain event's detail (the rest is the event's business)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    id: str = Field(max_length=64)
    installation: int | None = Field(default=None, ge=1)
    repository: Repository


def request_from_message(body: str) -> RefreshRequest:
    """The request a message of the dashboards queue carries: a domain event as the bus's rule
    delivered it (``source`` squadron), or a request of our own (a deferral, a sweep)."""
    try:
        found: Any = json.loads(body)
    except ValueError as exc:
        raise RefreshRequestError(f"a dashboards message is not JSON: {exc}") from exc
    if not isinstance(found, Mapping):
        raise RefreshRequestError(f"a dashboards message is JSON {type(found).__name__}, not an object")
    is_event = "detail-type" in found
    try:
        if is_event:
            if found.get("source") != SOURCE:
                raise RefreshRequestError(f"an event from {found.get('source')!r}, not {SOURCE!r}")
            detail = _BusDetail.model_validate(found.get("detail"))
            return RefreshRequest(
                repository=detail.repository,
                installation=detail.installation,
                cause="event",
                event_id=detail.id,
            )
        return RefreshRequest.model_validate(found)
    except ValidationError as exc:
        where = ("detail",) if is_event else ()
        problems = "; ".join(f"{'.'.join(map(str, (*where, *e['loc'])))}: {e['msg']}" for e in exc.errors())
        raise RefreshRequestError(f"a dashboards message is no refresh request: {problems}") from exc


def by_repository(requests: Iterable[RefreshRequest]) -> list[RefreshRequest]:
    """One request per repository, in the order first asked, standing for all of its requests:
    deferred if any is (one that comes early must defer again, not count as covered), a sweep
    if any is (it may open the issue)."""
    kept: dict[int, RefreshRequest] = {}
    for request in requests:
        seen = kept.get(request.repository.id)
        if seen is None:
            kept[request.repository.id] = request
            continue
        kept[request.repository.id] = seen.model_copy(
            update={
                "deferred": seen.deferred or request.deferred,
                "cause": "sweep" if "sweep" in (seen.cause, request.cause) else seen.cause,
                "installation": seen.installation or request.installation,
            }
        )
    return list(kept.values())


def claim_cutoff(now: datetime, interval: timedelta = REFRESH_INTERVAL) -> datetime:
    """A slot last rendered at or before this may be claimed now."""
    return now - interval


def due(rendered_at: datetime, interval: timedelta = REFRESH_INTERVAL) -> datetime:
    """When the next rendering after one at ``rendered_at`` may happen."""
    return rendered_at + interval


def delay_seconds(until: datetime, now: datetime) -> int:
    """The SQS delay of a request due at ``until``: whole seconds, rounded up (never early by
    rounding), at least one, at most SQS's 900."""
    return max(1, min(MAX_DELAY_SECONDS, math.ceil((until - now).total_seconds())))
