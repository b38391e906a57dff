"""Token vendor Lambda: an agent task (direct invoke) gets a narrowed GitHub installation token.

Answers ``{"token", "expires_at", "repository", "permissions"}``, or ``{"error": ...}``
naming why the request was refused. The token itself is never logged.
"""

from __future__ import annotations

import functools
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import ValidationError

from squadron.shell.tokens import TokenRefusedError, TokenRequest, TokenVendor
from squadron.shell.wiring import build_token_vendor

logger = Logger()
metrics = Metrics()


@functools.cache
def vendor() -> TokenVendor:
    return build_token_vendor()


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    try:
        request = TokenRequest.model_validate(event)
    except ValidationError as exc:
        first = exc.errors()[0]
        problem = f"{'.'.join(str(p) for p in first['loc']) or 'request'}: {first['msg']}"
        metrics.add_metric(name="TokenRequestsInvalid", unit=MetricUnit.Count, value=1)
        logger.warning("invalid token request", extra={"problem": problem})
        return {"error": f"invalid request: {problem}"}
    logger.append_keys(agent_id=request.agent_id)
    try:
        vended = vendor().vend(request)
    except TokenRefusedError as exc:
        metrics.add_metric(name="TokensRefused", unit=MetricUnit.Count, value=1)
        logger.warning("token refused", extra={"reason": str(exc)})
        return {"error": str(exc)}
    metrics.add_metric(name="TokensVended", unit=MetricUnit.Count, value=1)
    logger.info("token vended", extra={"repository": vended.repository, "permissions": vended.permissions})
    return {
        "token": vended.token,
        "expires_at": vended.expires_at.isoformat(),
        "repository": vended.repository,
        "permissions": vended.permissions,
    }
