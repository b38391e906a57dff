"""Read, change, put if unchanged: the one retry loop of a conditional write.

A record is read, a pure change decides what it becomes, and the put is conditional on the
version read (the store raises :class:`~squadron.domain.agents.ConflictError` when the record
changed meanwhile: someone else's write won). A lost put reads again and decides again, up to a
bound; past it the last ConflictError propagates, for the caller to say what that means (a
refusal, a log line, the queue's retry).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from squadron.domain.agents import ConflictError

S = TypeVar("S")
W = TypeVar("W")

#: How often a conditional write is tried before the conflict is the caller's.
ATTEMPTS = 3


@dataclass(frozen=True)
class Put(Generic[S, W]):
    """What the last attempt read, and what it put (None: the change said there was nothing to do)."""

    read: S
    written: W | None


def read_change_put(
    read: Callable[[], S],
    change: Callable[[S], W | None],
    put: Callable[[S, W], None],
    *,
    attempts: int = ATTEMPTS,
    first: Callable[[], S] | None = None,
) -> Put[S, W]:
    """``read``, ``change`` what was read (None: nothing to do, nothing put), ``put`` it on the
    condition that what was read is unchanged; a ConflictError from ``put`` reads again, up to
    ``attempts`` times in all, and the last one propagates past the bound. ``first``: how the
    first attempt reads, when the caller holds a fresh read already."""
    if attempts < 1:
        raise ValueError("at least one attempt")
    for attempt in range(1, attempts + 1):
        state = first() if attempt == 1 and first is not None else read()
        wanted = change(state)
        if wanted is None:
            return Put(state, None)
        try:
            put(state, wanted)
        except ConflictError:
            if attempt == attempts:
                raise
            continue
        return Put(state, wanted)
    raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover
