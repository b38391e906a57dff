"""Narrow interfaces the shell depends on; adapters implement them, tests fake them."""

from __future__ import annotations

from typing import Protocol

from squadron.domain.events import EventEnvelope


class EventQueue(Protocol):
    """Where accepted events go: events.fifo."""

    def send(self, envelope: EventEnvelope) -> str:
        """Enqueue ``envelope`` in its message group; return the queue's message id.

        Raises :class:`squadron.adapters.errors.QueueUnavailableError` when the
        queue did not take the message.
        """
        ...


class SecretSource(Protocol):
    """Reads secret values (webhook secret, App private key) by id."""

    def get(self, secret_id: str) -> str:
        """Return the current value; raises ``SecretUnavailableError`` when it cannot."""
        ...
