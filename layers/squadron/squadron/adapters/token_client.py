"""An agent task's GitHub token, from the token vendor Lambda (the task never holds the App key)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from squadron.adapters.errors import AdapterError

if TYPE_CHECKING:
    from mypy_boto3_lambda import LambdaClient

REFRESH_MARGIN = timedelta(minutes=5)


def _now() -> datetime:
    return datetime.now(UTC)


class AgentTokenError(AdapterError):
    """The vendor refused (or could not be reached); the task cannot act on GitHub."""


class VendedTokens:
    """``token()`` for one agent task: asked from the vendor, reused until 5 minutes before expiry."""

    def __init__(
        self,
        *,
        function: str,
        agent_id: str,
        launch_token: str,
        client: LambdaClient | None = None,
        clock: Callable[[], datetime] = _now,
    ) -> None:
        self.function = function
        self.agent_id = agent_id
        self.launch_token = launch_token
        self._client = client
        self.clock = clock
        self._token: tuple[str, datetime] | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"VendedTokens({self.agent_id} via {self.function})"

    @property
    def client(self) -> LambdaClient:
        if self._client is None:
            self._client = boto3.client("lambda")
        return self._client

    def token(self) -> str:
        with self._lock:
            if self._token is not None and self._token[1] - self.clock() > REFRESH_MARGIN:
                return self._token[0]
            answer = self._ask()
            if "error" in answer:
                raise AgentTokenError(f"token vendor refused {self.agent_id}: {answer['error']}")
            expires = datetime.fromisoformat(str(answer["expires_at"]))
            self._token = (str(answer["token"]), expires)
            return self._token[0]

    def _ask(self) -> dict[str, Any]:
        payload = json.dumps({"agent_id": self.agent_id, "launch_token": self.launch_token}).encode()
        try:
            response = self.client.invoke(FunctionName=self.function, Payload=payload)
        except (ClientError, BotoCoreError) as exc:
            raise AgentTokenError(f"invoking the token vendor {self.function} failed: {exc}") from exc
        body = response["Payload"].read()
        if response.get("FunctionError"):
            raise AgentTokenError(f"the token vendor {self.function} failed: {body[:500]!r}")
        answer: dict[str, Any] = json.loads(body)
        return answer
