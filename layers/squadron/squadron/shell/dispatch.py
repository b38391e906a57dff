"""One queue record → one routed delivery, at most once to completion.

The router Lambda hands each SQS record body to :class:`Dispatcher`. A body
that is not a valid envelope raises :class:`InvalidRecordError` (the record
goes back to the queue and, after its receives run out, to the DLQ, where a
human can read the precise problem); any failure while routing propagates the
same way. A delivery already completed is skipped by the delivery records.

A pipeline's task (a waiting stage's message, not an envelope) goes to
:class:`~squadron.shell.pipelines.PipelineTasks`; a malformed one is an
invalid record with the wire's problem.

A delivery of a paused repository (its configuration is invalid) is routed with
what starts something withheld, and is *not* recorded as completed: the same
delivery (a reconciler replay, a redelivery) is routed in full once the
configuration is valid again.

A record that is not an event envelope says what it is in its ``kind`` (an envelope has none):
:class:`Dispatcher` hands it to the handler its ``kinds`` table names, so a new kind of message
on the queue is one row there.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from pydantic import ValidationError

from squadron.domain.change_set_commands import is_change_set_command
from squadron.domain.effects import Discard, LaunchAgent
from squadron.domain.events import EventEnvelope
from squadron.domain.outbox import maybe_redriven
from squadron.domain.pipeline_wire import TASK_KIND, WireError, parse_task
from squadron.domain.pipelines.ended_by_others import ended_agents
from squadron.errors import SquadronError
from squadron.shell.pipelines import PipelineTasks
from squadron.shell.router import RouterService

Once = Callable[[Callable[..., dict[str, Any]]], Callable[..., dict[str, Any]]]
#: A handler of a kind of queue record that is no event envelope: (body, message id) -> summary.
KindHandler = Callable[[str, str | None], dict[str, Any]]


class AfterRouting(Protocol):
    """What steps on after each routed delivery, idempotently (a change set's merges:
    :meth:`squadron.shell.change_set_merging.ChangeSetMerger.after_routing`)."""

    def after_routing(self, envelope: EventEnvelope) -> dict[str, Any]: ...


class InvalidRecordError(SquadronError):
    """A queue record whose body is not an event envelope this version understands."""

    def __init__(self, message_id: str | None, problem: str) -> None:
        self.message_id = message_id
        self.problem = problem
        super().__init__(f"record {message_id or '?'} is not a valid envelope: {problem}")


def parse_record(body: str, message_id: str | None = None) -> EventEnvelope:
    try:
        return EventEnvelope.from_message(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "body"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise InvalidRecordError(message_id, f"{where}: {first['msg']}{more}") from exc


def record_kind(body: str) -> str | None:
    """The ``kind`` a queue record says it is (None: none, as for an event envelope)."""
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return None
    kind = value.get("kind") if isinstance(value, dict) else None
    return kind if isinstance(kind, str) else None


class Dispatcher:
    def __init__(
        self,
        service: RouterService,
        *,
        once: Once | None = None,
        kinds: Mapping[str, KindHandler] | None = None,
        pipeline_tasks: PipelineTasks | None = None,
        change_sets: AfterRouting | None = None,
    ) -> None:
        self.service = service
        #: Change sets a member's pull request closing steps on (docs/change-sets.md).
        self.change_sets = change_sets
        self.pipeline_tasks = pipeline_tasks
        #: The handler of each ``kind`` of record that is not an event envelope; a pipeline's task
        #: is always one (refused with a reason when this router has no pipelines).
        self.kinds: dict[str, KindHandler] = {TASK_KIND: self._pipeline_task, **(kinds or {})}
        self._route: Callable[..., dict[str, Any]] = once(self._route_once) if once else self._route_once
        self._routed = False
        self._first_receive = False

    def handle(
        self, body: str, message_id: str | None = None, *, first_receive: bool = False
    ) -> dict[str, Any]:
        """Route the envelope in ``body``; returns a summary (also what a duplicate is answered with).

        The summary's ``duplicate`` says whether this delivery had been routed already (then
        the rest is the first routing's summary, and nothing was done now). ``first_receive``:
        the queue hands this record over for the first time (its ApproximateReceiveCount is 1);
        an event older than :data:`~squadron.domain.outbox.REDRIVE_AFTER` counts as redelivered
        (a dead-letter redrive is a new message to SQS, its count 1 again).
        """
        self._routed = False
        handler = self.kinds.get(record_kind(body) or "")
        if handler is not None:
            return handler(body, message_id)
        envelope = parse_record(body, message_id)
        # A redrive from the dead-letter queue comes with its receive count at 1 again.
        now = self.service.clock()
        self._first_receive = first_receive and not maybe_redriven(envelope.received_at, now)
        pause = self.service.pause_for(envelope)
        if pause is not None:
            routed = {**self._route_once(envelope, pause=pause), "duplicate": False, "paused": pause}
            return {**routed, **self._answer_waiting(envelope)}
        summary = self._route(envelope=envelope)
        # A change set steps on after every delivery, a redelivered one too (its steps are idempotent).
        stepped = self.change_sets.after_routing(envelope) if self.change_sets is not None else {}
        return {**summary, "duplicate": not self._routed, **self._answer_waiting(envelope), **stepped}

    def _answer_waiting(self, envelope: EventEnvelope) -> dict[str, Any]:
        """Events that may answer a waiting pipeline stage (a human stage's approval, comment,
        label): after routing, on every delivery, a redelivered one too (what answers a stage is
        idempotent under its own records). ``waiting`` in the summary when any was."""
        if self.pipeline_tasks is None or is_change_set_command(envelope):
            return {}  # a change-set command is a command only, never a person's answer to a stage
        answered = self.pipeline_tasks.answer_waiting(envelope)
        return {"waiting": answered} if answered else {}

    def _pipeline_task(self, body: str, message_id: str | None) -> dict[str, Any]:
        try:
            task = parse_task(body)
        except WireError as exc:
            raise InvalidRecordError(message_id, exc.problem) from exc
        if task is None:  # its kind says it is one, yet it is no JSON object of that kind
            raise InvalidRecordError(message_id, "not a pipeline task")
        if self.pipeline_tasks is None:
            raise InvalidRecordError(
                message_id, "a pipeline task, and this router has no pipelines configured"
            )
        return {**self.pipeline_tasks.handle(task), "duplicate": False}

    def _route_once(self, envelope: EventEnvelope, pause: str | None = None) -> dict[str, Any]:
        result = self.service.process(envelope, pause=pause, first_receive=self._first_receive)
        # An agent's routed end may settle a pipeline's agent stage (answered once, before this
        # delivery is recorded done: a retry answers what is left).
        stages = self.pipeline_tasks.agents if self.pipeline_tasks is not None else None
        stage = stages.after_routing(envelope, ended_agents(result.effects)) if stages is not None else None
        self._routed = True
        return {
            "delivery_id": result.delivery_id,
            "event": f"{envelope.event}.{envelope.action}" if envelope.action else envelope.event,
            "effects": [type(effect).__name__ for effect in result.effects],
            "discarded": [effect.reason for effect in result.effects if isinstance(effect, Discard)],
            "refused": [
                effect.rule for effect in result.effects if isinstance(effect, Discard) and effect.rule
            ],
            "launches": [effect.purpose for effect in result.effects if isinstance(effect, LaunchAgent)],
            "transitions": list(result.transitions),
            "held": list(result.held),
            "resumed": result.resumed,
            "failed": list(result.failed),
            "busy": result.busy,
            **({"pipeline_stage": stage} if stage is not None else {}),
        }
