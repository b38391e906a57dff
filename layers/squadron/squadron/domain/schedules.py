"""A repository's retrospective schedule on EventBridge Scheduler — pure.

One schedule per repository (``squadron-retro-<repo id>``, in the stage's schedule group), at
the repository's ``retrospective.schedule`` expression (UTC). Its target is Scheduler's
universal SQS target (``aws-sdk:sqs:sendMessage``): at each firing it sends events.fifo, in
the repository's message group, the envelope of a :class:`~squadron.domain.commands.StartRetrospective`
whose delivery id, deduplication id and times carry the firing's time — Scheduler substitutes
``<aws.scheduler.scheduled-time>`` (e.g. ``2026-11-30T09:00:00Z``) in the input. The router
then decides as for any command (and a firing delivered twice is one delivery).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from squadron.domain.commands import StartRetrospective
from squadron.domain.events import command_envelope

#: Scheduler's context attribute for the firing's time, substituted in the target's input.
SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"
#: Scheduler's universal target for SQS SendMessage (it can set the deduplication id).
SQS_SEND_TARGET = "arn:aws:scheduler:::aws-sdk:sqs:sendMessage"
_SENTINEL = datetime(2000, 1, 1, tzinfo=UTC)
_SENTINEL_TEXT = "2000-01-01T00:00:00Z"


def schedule_name(repo_id: int) -> str:
    return f"squadron-retro-{repo_id}"


def target_input(queue_url: str, repo_id: int, full_name: str, installation_id: int | None) -> str:
    """The target's input: SendMessage's parameters, the firing's time left to Scheduler."""
    envelope = command_envelope(
        StartRetrospective(trigger="schedule"),
        repository={"id": repo_id, "full_name": full_name, "default_branch": None},
        installation_id=installation_id,
        delivery_id=f"retro-{repo_id}-{_SENTINEL_TEXT}",
        now=_SENTINEL,
    )
    body = envelope.to_message()
    if body.count(_SENTINEL_TEXT) != 3:  # the delivery id, received_at and occurred_at
        raise ValueError(f"the retrospective's envelope does not carry its time where expected: {body}")
    return json.dumps(
        {
            "QueueUrl": queue_url,
            "MessageBody": body.replace(_SENTINEL_TEXT, SCHEDULED_TIME),
            "MessageGroupId": envelope.message_group_id,
            "MessageDeduplicationId": f"retro-{repo_id}-{SCHEDULED_TIME}",
        },
        separators=(",", ":"),
        sort_keys=True,
    )


def fired(target_input_text: str, at: datetime) -> dict[str, Any]:
    """SendMessage's parameters as Scheduler sends them when the schedule fires at ``at``."""
    when = at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    parameters: dict[str, Any] = json.loads(target_input_text.replace(SCHEDULED_TIME, when))
    return parameters
