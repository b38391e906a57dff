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


class FileTooLargeError(SquadronError):
    """A file is larger than the caller is willing to read; nothing of it was read past the limit."""

    def __init__(self, path: str, size: int, limit: int) -> None:
        self.path = path
        self.size = size
        self.limit = limit
        super().__init__(f"{path} is {size} bytes, over the {limit} bytes read at most")
