"""A keyed write that creates something on GitHub, sent so that it is applied once.

GitHub can apply a write and still answer 5xx, or lose the answer (a read timeout, a dropped
connection); the transport then raises :class:`MaybeAppliedError` instead of sending it again.
:func:`once` is what a caller holding the write's key does about it: look up what the key names
and send again only when GitHub shows nothing there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from squadron.adapters.github.errors import MaybeAppliedError

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: How many times a keyed write is sent in all while GitHub keeps answering without saying.
SENDS = 3


def once(send: Callable[[], T], find: Callable[[], T | None], *, sends: int = SENDS) -> T:
    """GitHub's answer to ``send``, or what ``find`` shows it created when the answer was lost.

    ``find`` looks the write up by its key (it raises when it cannot read all it must: a failed
    lookup is never taken for "not applied"). Found: that is the answer, nothing is sent again.
    Not found: sent again, ``sends`` times in all; then the last :class:`MaybeAppliedError`
    propagates, and the caller's own retry (the queue's, the task's) looks up again first.
    """
    last: MaybeAppliedError | None = None
    for attempt in range(1, sends + 1):
        try:
            return send()
        except MaybeAppliedError as exc:
            last = exc
            found = find()
            if found is not None:
                logger.info("%s: GitHub's answer was lost, but it was applied", exc.path)
                return found
            logger.warning("%s: GitHub's answer was lost and it shows nothing (send %d)", exc.path, attempt)
    assert last is not None
    raise last
