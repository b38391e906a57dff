"""Ingress Lambda: POST /webhook from API Gateway (HTTP API) → verify → envelope → events.fifo.

Thin by design: parse the request, call the shell, count the outcome, answer.
"""

from __future__ import annotations

import base64
import binascii
import functools
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.utilities.typing import LambdaContext

from squadron.adapters.metrics import EmfMetrics
from squadron.domain.metrics import ingress_points
from squadron.errors import ConfigurationError
from squadron.shell.ingress import IngressOutcome, WebhookIngress, build_ingress
from squadron.shell.tracing import Tracing

logger = Logger()
metrics = Metrics()
tracing = Tracing()  # X-Ray only when the environment turns it on (imported then)
app = APIGatewayHttpResolver()
published = EmfMetrics(metrics)


@functools.cache
def ingress() -> WebhookIngress:
    """One wired ingress per container (clients and the secret cache are reused)."""
    return build_ingress()


def _raw_body() -> bytes | IngressOutcome:
    """The request's bytes, as GitHub signed them; or why they cannot be had."""
    event = app.current_event
    body = event.body or ""
    if event.is_base64_encoded:
        try:
            return base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            return _unreadable("body_not_base64", "the body is marked base64-encoded but is not valid base64")
    try:
        return body.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate: what arrived was not UTF-8 text
        return _unreadable("body_not_utf8", f"the body is not UTF-8 text (character {exc.start})")


def _unreadable(code: str, reason: str) -> IngressOutcome:
    return IngressOutcome(400, "rejected", code, {"status": "rejected", "reason": reason})


def _answer(outcome: IngressOutcome) -> Response[Any]:
    published.publish(ingress_points(outcome.outcome, outcome.code))
    log = logger.warning if outcome.status_code >= 400 else logger.info
    log(
        "webhook %s",
        outcome.outcome,
        extra={"status_code": outcome.status_code, "code": outcome.code, **outcome.body},
    )
    return Response(
        status_code=outcome.status_code, content_type=content_types.APPLICATION_JSON, body=outcome.body
    )


@app.post("/webhook")
@tracing.capture_method
def webhook() -> Response[Any]:
    headers = {key.lower(): value for key, value in (app.current_event.headers or {}).items()}
    logger.set_correlation_id(headers.get("x-github-delivery"))
    logger.append_keys(github_event=headers.get("x-github-event"))
    try:
        service = ingress()
    except ConfigurationError as exc:
        return _answer(
            IngressOutcome(500, "failed", "misconfigured", {"status": "error", "reason": str(exc)})
        )
    body = _raw_body()
    if isinstance(body, IngressOutcome):
        return _answer(body)
    return _answer(service.handle(headers, body))


@app.not_found
def not_found(exc: Exception) -> Response[Any]:
    event = app.current_event
    reason = f"no route {event.request_context.http.method} {event.raw_path}; GitHub posts to POST /webhook"
    return _answer(IngressOutcome(404, "rejected", "no_route", {"status": "rejected", "reason": reason}))


@logger.inject_lambda_context(clear_state=True)
@tracing.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
