"""Agent gateway Lambda: the one door of agent tasks (direct invoke), see squadron.shell.gateway.

Answers the operation's result, or ``{"error", "code"}`` naming why the call was refused.
Secrets (the caller's launch secret, a vended token, a provider key) are never logged.
"""

from __future__ import annotations

import functools
import os
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.typing import LambdaContext

from squadron.adapters.metrics import EmfMetrics
from squadron.domain.metrics import gateway_points, github_points
from squadron.shell import wiring
from squadron.shell.gateway import AgentGateway, sanitized

logger = Logger()
metrics = Metrics()
published = EmfMetrics(metrics)


@functools.cache
def gateway() -> AgentGateway:
    return wiring.build_gateway(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE"))


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    try:
        return _answer(event)
    finally:
        published.publish(github_points(wiring.github_calls.drain()))


def _answer(event: Any) -> dict[str, Any]:
    served = gateway().serve(event)
    logger.append_keys(agent_id=served.agent_id, op=served.op)
    if served.launch_token:
        logger.set_correlation_id(served.launch_token)
    published.publish(gateway_points(served.op, served.refused))
    if served.refused is not None:
        logger.warning(
            "refused",
            extra={"reason": served.body.get("error"), "code": served.refused, "request": sanitized(event)},
        )
    elif served.secret:
        logger.info("answered", extra={"keys": sorted(served.body)})
    else:
        logger.info("answered")
    return served.body
