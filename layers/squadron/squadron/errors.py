"""The one error hierarchy of Squadron.

Every error the project raises on purpose derives from :class:`SquadronError`.
Subclasses end in ``Error`` and carry their data as attributes, so callers can
act on them without parsing messages.
"""

from __future__ import annotations


class SquadronError(Exception):
    """Base class of every error Squadron raises on purpose."""


class ConfigurationError(SquadronError):
    """A setting (environment variable, context value, config file) is missing or invalid."""

    def __init__(self, message: str, *, source: str | None = None) -> None:
        self.source = source
        super().__init__(f"{source}: {message}" if source else message)
