"""Token vendor Lambda: an agent task (direct invoke) gets a narrowed GitHub installation token.

Answers ``{"token", "expires_at", "repository", "permissions"}``, or ``{"error": ...}``
naming why the request was refused. The token itself is never logged.
"""

from __future__ import annotations

import functools
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import ValidationError

from squadron.adapters.metrics import EmfMetrics
from squadron.domain.metrics import github_points, token_points
from squadron.shell import wiring
from squadron.shell.tokens import TokenRefusedError, TokenRequest, TokenVendor

logger = Logger()
metrics = Metrics()
published = EmfMetrics(metrics)


@functools.cache
def vendor() -> TokenVendor:
    return wiring.build_token_vendor()


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    try:
        return _answer(event)
    finally:
        published.publish(github_points(wiring.github_calls.drain()))


def _answer(event: dict[str, Any]) -> dict[str, Any]:
    try:
        request = TokenRequest.model_validate(event)
    except ValidationError as exc:
        first = exc.errors()[0]
        problem = f"{'.'.join(str(p) for p in first['loc']) or 'request'}: {first['msg']}"
        published.publish(token_points("invalid_request"))
        logger.warning("invalid token request", extra={"problem": problem})
        return {"error": f"invalid request: {problem}"}
    logger.append_keys(agent_id=request.agent_id)
    logger.set_correlation_id(request.launch_token)
    try:
        vended = vendor().vend(request)
    except TokenRefusedError as exc:
        published.publish(token_points(exc.code))
        logger.warning("token refused", extra={"reason": str(exc), "code": exc.code})
        return {"error": str(exc)}
    published.publish(token_points(None))
    logger.info("token vended", extra={"repository": vended.repository, "permissions": vended.permissions})
    return {
        "token": vended.token,
        "expires_at": vended.expires_at.isoformat(),
        "repository": vended.repository,
        "permissions": vended.permissions,
    }
