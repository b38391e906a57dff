"""The normalized event envelope: what the ingress puts on events.fifo and the router reads.

A GitHub webhook payload is large (tens of kilobytes) and mostly irrelevant to
routing. The ingress trims it (:func:`squadron.domain.event_trimming.build_envelope`)
to an :class:`EventEnvelope`: versioned, typed, bounded in size, and carrying exactly
the fields routing needs (its parts are in :mod:`squadron.domain.event_fields`, the
framework's commands in :mod:`squadron.domain.commands`). Free text (issue, comment,
pull request and review bodies) is cut to
:data:`~squadron.domain.event_fields.MAX_BODY_BYTES` UTF-8 bytes so a message never
nears the SQS limit.

Everything here is pure: no I/O, no clocks (the caller passes ``now``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from squadron.domain.commands import SQUADRON_EVENT, SquadronCommand
from squadron.domain.event_fields import (
    Actor,
    CheckFields,
    CommentFields,
    EnvelopeModel,
    GitHubId,
    IssueFields,
    Label,
    MergeGroupFields,
    MilestoneFields,
    PullRequestFields,
    RepositoryRef,
    ReviewFields,
    StatusFields,
    Word,
)
from squadron.errors import SquadronError

ENVELOPE_SCHEMA_VERSION: Literal[1] = 1
#: A serialized envelope never exceeds this many bytes (SQS accepts 256 KiB).
MAX_ENVELOPE_BYTES = 200 * 1024
#: SQS takes a deduplication id of 1 to 128 characters, each ASCII letter, digit or punctuation.
DELIVERY_ID_PATTERN = r"^[!-~]{1,128}$"


class EnvelopeError(SquadronError):
    """A payload of a routed event cannot be trimmed into an envelope."""

    def __init__(self, event: str, detail: str) -> None:
        self.event = event
        self.detail = detail
        super().__init__(f"{event} payload is not usable: {detail}")


class EventEnvelope(EnvelopeModel):
    """A trimmed, versioned GitHub event, as carried on events.fifo.

    ``origin`` is ``github`` for webhooks; the framework puts ``squadron``
    envelopes on the same queue for the effects of its own actions, because
    the App's own webhooks are dropped at the ingress; ``reconciler`` marks a
    webhook rebuilt from GitHub's current state because the original was missed;
    ``agent`` marks what an agent's task sent through the agent gateway, which
    stamps ``source_agent`` from the verified caller. Only the ingress, the
    router, the reconciler and the gateway may put envelopes on the queue.
    """

    schema_version: Literal[1] = ENVELOPE_SCHEMA_VERSION
    origin: Literal["github", "squadron", "reconciler", "agent"] = "github"
    #: The agent whose task sent this (origin ``agent`` only), as the gateway verified it.
    source_agent: str | None = Field(default=None, max_length=200)
    delivery_id: str = Field(pattern=DELIVERY_ID_PATTERN)
    event: str = Field(min_length=1, max_length=64)
    action: Word | None = None
    received_at: datetime
    #: When the change happened on GitHub (from the payload's own timestamps); unlike
    #: ``received_at`` it stays the same when GitHub redelivers the event.
    occurred_at: datetime | None = None
    installation_id: GitHubId | None = None
    repository: RepositoryRef
    sender: Actor
    issue: IssueFields | None = None
    comment: CommentFields | None = None
    pull_request: PullRequestFields | None = None
    review: ReviewFields | None = None
    check: CheckFields | None = None
    status: StatusFields | None = None
    merge_group: MergeGroupFields | None = None
    label: Label | None = None
    assignee: Actor | None = None
    milestone: MilestoneFields | None = None
    command: SquadronCommand | None = None

    @property
    def subject_number(self) -> int | None:
        """The issue or pull request number the event is about, if any."""
        if self.issue is not None:
            return self.issue.number
        if self.command is not None:
            return self.command.issue_number
        if self.pull_request is not None:
            return self.pull_request.number
        if self.check is not None and self.check.pull_request_numbers:
            return min(self.check.pull_request_numbers)
        if self.merge_group is not None:
            return self.merge_group.pr_number
        return None

    @property
    def message_group_id(self) -> str:
        """FIFO message group: one per issue or pull request, else one per repository."""
        number = self.subject_number
        suffix = str(number) if number is not None else "repo"
        return f"{self.repository.id}#{suffix}"

    def to_message(self) -> str:
        """Serialize for the queue; guaranteed below :data:`MAX_ENVELOPE_BYTES`."""
        text = self.model_dump_json(exclude_none=True, exclude_defaults=False)
        size = len(text.encode("utf-8"))
        if size > MAX_ENVELOPE_BYTES:
            raise EnvelopeError(self.event, f"serialized envelope is {size} bytes, over {MAX_ENVELOPE_BYTES}")
        return text

    @classmethod
    def from_message(cls, text: str | bytes) -> EventEnvelope:
        return cls.model_validate_json(text)


def command_envelope(
    command: SquadronCommand,
    *,
    repository: Mapping[str, Any],
    installation_id: int | None,
    delivery_id: str,
    now: datetime,
    origin: Literal["squadron", "reconciler", "agent"] = "squadron",
) -> EventEnvelope:
    """A framework command as an envelope for events.fifo (in its issue's message group)."""
    return EventEnvelope.model_validate(
        {
            "delivery_id": delivery_id[-128:],
            "event": SQUADRON_EVENT,
            "action": command.type,
            "origin": origin,
            "received_at": now,
            "occurred_at": now,
            "installation_id": installation_id,
            "repository": {
                "id": repository.get("id"),
                "full_name": repository.get("full_name"),
                "default_branch": repository.get("default_branch"),
            },
            "sender": {"login": "squadron[bot]", "id": 0, "type": "Bot"},
            "command": command.model_dump(),
        }
    )
