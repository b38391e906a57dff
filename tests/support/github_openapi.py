"""GitHub's REST OpenAPI description as a validator of httpx requests (see :mod:`squadron.local.openapi`)."""

from __future__ import annotations

import httpx

from squadron.local.openapi import Call, InvalidRequestError, Operation, operation_for, spec, validate_call

__all__ = ["InvalidRequestError", "Operation", "operation_for", "spec", "validate"]


def validate(request: httpx.Request) -> Operation:
    """Assert ``request`` is a valid call of a GitHub REST operation; return the operation."""
    call = Call(
        method=request.method,
        raw_path=request.url.raw_path.decode().split("?")[0],
        query=dict(request.url.params),
        content=request.content,
    )
    return validate_call(call)[0]
