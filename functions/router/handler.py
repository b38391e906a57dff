"""Router Lambda: events.fifo → route each delivery → registry writes, agent launches, GitHub calls.

Thin by design. Records are processed in order per message group (one issue or
pull request); when one fails, it and the rest of its group go back to the
queue (``skip_group_on_error``) while other groups carry on. Each delivery
completes at most once (delivery records); a failed one is retried from the
start, and after ``maxReceiveCount`` receives the DLQ keeps it. A stack that does not know its
GitHub App yet (deployed before the App existed) routes nothing and loses nothing: every
record goes back to the queue with one error line saying what to deploy.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.batch import SqsFifoPartialProcessor, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from squadron.adapters.metrics import EmfMetrics
from squadron.domain.metrics import github_points, point, routing_points
from squadron.settings import AppNotConfiguredError
from squadron.shell import wiring
from squadron.shell.dispatch import Dispatcher
from squadron.shell.tracing import Tracing

logger = Logger()
metrics = Metrics()
tracing = Tracing()  # X-Ray only when the environment turns it on (imported then)
processor = SqsFifoPartialProcessor(skip_group_on_error=True)
published = EmfMetrics(metrics)


@functools.cache
def runtime() -> wiring.RouterRuntime:
    """One wired router per container (clients, token and config caches are reused)."""
    return wiring.build_router()


def dispatcher() -> Dispatcher:
    return runtime().dispatcher


def _delivery_id(record: SQSRecord) -> str | None:
    try:
        body = json.loads(record.body)
    except (ValueError, RecursionError):
        return None  # the dispatcher names the problem
    delivery = body.get("delivery_id") if isinstance(body, dict) else None
    return delivery if isinstance(delivery, str) else None


@tracing.capture_method
def record_handler(record: SQSRecord) -> dict[str, Any]:
    logger.set_correlation_id(_delivery_id(record))
    logger.append_keys(message_group=record.attributes.message_group_id, message_id=record.message_id)
    try:
        first = record.attributes.approximate_receive_count == "1"
        summary = dispatcher().handle(record.body, record.message_id, first_receive=first)
    except Exception:
        published.publish([point("DeliveriesFailed")])
        logger.exception("routing failed; the record and the rest of its group go back to the queue")
        raise
    if summary["duplicate"]:
        published.publish([point("DeliveriesDuplicate")])
    else:
        published.publish(routing_points(summary))
    logger.info("routed", extra={"routing": summary})
    return summary


def _hold(event: dict[str, Any], reason: AppNotConfiguredError) -> PartialItemFailureResponse:
    """Every record back to the queue (it is retried, then kept by the DLQ for redrive): without
    its App the router cannot read a repository's configuration nor act on GitHub."""
    records = [SQSRecord(record) for record in event.get("Records", [])]
    logger.error(
        "routing held: %s",
        reason,
        extra={"held": [r.message_id for r in records], "delivery_ids": [_delivery_id(r) for r in records]},
    )
    published.publish([point("DeliveriesFailed") for _ in records])
    return {"batchItemFailures": [{"itemIdentifier": r.message_id} for r in records]}


@logger.inject_lambda_context(clear_state=True)
@tracing.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    try:
        router = runtime()
    except AppNotConfiguredError as exc:
        return _hold(event, exc)
    router.register_lambda_context(context)
    try:
        return process_partial_response(
            event=event, record_handler=record_handler, processor=processor, context=context
        )
    finally:
        published.publish(github_points(wiring.github_calls.drain()))
