"""Dashboards Lambda: the dashboards queue -> each repository's dashboard issue, at most once a minute.

Thin by design. A batch holds domain events (an EventBridge rule on the bus delivers every one),
deferred renderings and the reconciler's sweeps; the service renders each repository once
(:mod:`squadron.shell.dashboards`). A record that is no refresh request, or whose repository
could not be rendered, goes back to the queue (retried, then kept by its dead-letter queue, with
an alarm); the rest of the batch is done. A stack that does not know its GitHub App yet renders
nothing and holds every record.
"""

from __future__ import annotations

import functools
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from squadron.domain.dashboard_refresh import RefreshRequest, RefreshRequestError, request_from_message
from squadron.settings import AppNotConfiguredError
from squadron.shell import wiring
from squadron.shell.dashboards import DashboardService

logger = Logger()


@functools.cache
def service() -> DashboardService:
    return wiring.build_dashboards()


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    records = event.get("Records", [])
    failed: list[str] = []
    requests: list[tuple[str, RefreshRequest]] = []
    for record in records:
        try:
            requests.append((record["messageId"], request_from_message(str(record.get("body", "")))))
        except RefreshRequestError as exc:
            logger.error(
                "not a refresh request", extra={"message_id": record.get("messageId"), "error": str(exc)}
            )
            failed.append(record["messageId"])
    try:
        dashboards = service()
    except AppNotConfiguredError as exc:
        logger.error("no dashboards until the stack knows its App; records held", extra={"reason": str(exc)})
        return {"batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in records]}
    report = dashboards.refresh([request for _, request in requests])
    failed += [message for message, request in requests if request.repository.id in report.failed]
    summary = {
        "requests": len(records),
        "rendered": report.rendered,
        "edited": report.edited,
        "deferred": report.deferred,
        "covered": report.covered,
        "off": report.off,
        "unopened": report.unopened,
        "failed": list(report.failed.values()),
    }
    logger.info("dashboards", extra=summary)
    return {"batchItemFailures": [{"itemIdentifier": message} for message in failed], **summary}
