"""Publisher Lambda: the registry's stream -> the stage's domain event bus.

Thin by design. The event source mapping hands it only inserts of event items (a filter on
``entity``), in commit order per shard; each is put on the bus as committed (see
:mod:`squadron.adapters.event_bus`). When EventBridge refuses, the batch reports the first
record not published, so the stream retries from there (a record already put may be put
again: consumers dedupe by ``detail.id``); after the mapping's retries its place goes to the
failure queue, with an alarm.
"""

from __future__ import annotations

import functools
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from squadron.adapters.event_bus import EventBusError, EventBusPublisher, committed_events
from squadron.settings import PublisherSettings, load_settings

logger = Logger()


@functools.cache
def publisher() -> EventBusPublisher:
    settings = load_settings(PublisherSettings)
    return EventBusPublisher(settings.event_bus_name, settings.stage)


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    committed = committed_events(event.get("Records", []))
    bus = publisher()
    for done, (sequence, domain_event) in enumerate(committed):
        try:
            bus.publish([domain_event])
        except EventBusError as exc:
            logger.error("not published", extra={"event_id": domain_event.id, "error": str(exc)})
            return {"batchItemFailures": [{"itemIdentifier": sequence}], "published": done}
    logger.info("published", extra={"events": [e.id for _, e in committed]})
    return {"batchItemFailures": [], "published": len(committed)}
