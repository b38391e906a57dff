"""An agent task's way to the agent gateway: Lambda Invoke (the task role's one real right)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from squadron.adapters.errors import AdapterError

if TYPE_CHECKING:
    from mypy_boto3_lambda import LambdaClient


class GatewayUnavailableError(AdapterError):
    """The gateway could not be reached, or failed (not a refusal: a refusal is an answer)."""


class LambdaTransport:
    """``transport(request) -> answer``: one synchronous invocation of the gateway function."""

    def __init__(self, function: str, *, client: LambdaClient | None = None) -> None:
        self.function = function
        self._client = client

    def __repr__(self) -> str:
        return f"LambdaTransport({self.function})"

    @property
    def client(self) -> LambdaClient:
        if self._client is None:
            self._client = boto3.client("lambda")
        return self._client

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        try:
            response = self.client.invoke(FunctionName=self.function, Payload=json.dumps(request).encode())
        except (ClientError, BotoCoreError) as exc:
            raise GatewayUnavailableError(
                f"invoking the agent gateway {self.function} failed: {exc}"
            ) from exc
        body = response["Payload"].read()
        if response.get("FunctionError"):
            raise GatewayUnavailableError(f"the agent gateway {self.function} failed: {body[:500]!r}")
        try:
            answer = json.loads(body)
        except ValueError as exc:
            raise GatewayUnavailableError(f"the agent gateway answered no JSON: {body[:200]!r}") from exc
        if not isinstance(answer, dict):
            raise GatewayUnavailableError(
                f"the agent gateway answered {type(answer).__name__}, not an object"
            )
        return answer
