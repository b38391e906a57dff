"""Errors adapters raise when an AWS service fails; each carries the service's own words."""

from __future__ import annotations

from squadron.errors import SquadronError


class AdapterError(SquadronError):
    """An AWS call failed. ``code`` is the service's error code when it gave one."""

    def __init__(self, message: str, *, code: str | None = None) -> None:
        self.code = code
        super().__init__(message)


class QueueUnavailableError(AdapterError):
    """A message could not be put on, or read from, a queue."""


class SecretUnavailableError(AdapterError):
    """A secret is missing, empty or unreadable."""
