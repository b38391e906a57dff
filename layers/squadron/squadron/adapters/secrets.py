"""Secrets Manager adapter for the :class:`~squadron.ports.SecretSource` port.

Values are cached per container for ``max_age`` seconds through Powertools'
parameters utility, so a warm Lambda reads a secret once per cache period.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import boto3
from aws_lambda_powertools.utilities.parameters import SecretsProvider
from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError

from squadron.adapters.errors import SecretUnavailableError

if TYPE_CHECKING:
    from mypy_boto3_secretsmanager import SecretsManagerClient


class SecretsManagerSource:
    def __init__(self, *, max_age: int = 300, client: SecretsManagerClient | None = None) -> None:
        self.max_age = max_age
        self._client = client
        self._provider: SecretsProvider | None = None

    @property
    def provider(self) -> SecretsProvider:
        if self._provider is None:
            self._provider = SecretsProvider(boto3_client=self._client or boto3.client("secretsmanager"))
        return self._provider

    def get(self, secret_id: str) -> str:
        try:
            value = self.provider.get(secret_id, max_age=self.max_age)
        except GetParameterError as exc:
            raise SecretUnavailableError(f"secret {secret_id} cannot be read: {exc}") from exc
        if isinstance(value, bytes):
            try:
                value = value.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise SecretUnavailableError(f"secret {secret_id} is binary, not text") from exc
        if not isinstance(value, str) or not value.strip():
            raise SecretUnavailableError(f"secret {secret_id} is empty")
        # A trailing newline is an artefact of how the value was stored, never part of it.
        return value.rstrip("\r\n")
