"""The gateway's side of the wire (:mod:`squadron.domain.gateway_wire`): a request parsed (or
refused), an answer served, a request as it may be logged."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from squadron.domain.gateway_wire import GatewayRequest, Request, WireAnswer, problem
from squadron.domain.launches import LaunchRefusedError

if TYPE_CHECKING:
    from squadron.shell.gateway.service import AgentGateway


class _Envelope(BaseModel):
    request: GatewayRequest


def parse_request(event: Any) -> Request:
    """The request, or LaunchRefusedError("invalid_request") naming the first problem."""
    try:
        return _Envelope.model_validate({"request": event}).request
    except ValidationError as exc:
        raise LaunchRefusedError("invalid_request", problem(exc, skip=1)) from exc


@dataclass(frozen=True)
class Answer:
    """What the gateway answers; ``secret`` marks answers never to be logged."""

    reply: WireAnswer
    secret: bool = False

    @property
    def body(self) -> dict[str, Any]:
        """The answer as it goes on the wire."""
        return self.reply.wire()


@dataclass(frozen=True)
class Served:
    """One call, answered: the body for the caller, and what the handler logs and counts."""

    body: dict[str, Any]
    op: str
    agent_id: str | None = None
    launch_token: str | None = None
    #: The refusal's code (None: answered).
    refused: str | None = None
    #: The body holds a secret (a token, a key): never logged.
    secret: bool = False


Handler = Callable[["AgentGateway", Any], Answer]
"""One operation: the gateway and its parsed request in, the answer out (refused: LaunchRefusedError)."""


def sanitized(event: Any) -> dict[str, Any]:
    """A request as it may be logged: the secret replaced."""
    if not isinstance(event, dict):
        return {"request": type(event).__name__}
    shown = {k: v for k, v in event.items() if k not in ("secret", "message", "points", "items")}
    return {**shown, "secret": "***" if "secret" in event else None}
