"""A Lambda invocation on the local stack, bounded as Lambda bounds it.

Lambda ends an invocation that passes its function's timeout: the runtime is stopped wherever it
is (no handler of the function's own runs), nothing is answered, and for an SQS event source the
batch is not deleted, so its messages come back after the queue's visibility timeout. The
router's reasoning counts on it: events.fifo's visibility timeout, a decision's claim and a
launch's arming (:data:`~squadron.adapters.local_aws.EVENTS_VISIBILITY`, ``ARMING_HELD``) are
longer than a run may last (:data:`~squadron.adapters.local_aws.ROUTER_RUN`), so whoever carries
the event out next finds the dead run's holds lapsed and the dead run does nothing more.

:func:`invoke` gives the local stack's workers the same bound: the handler runs in a thread of
its own; past the timeout it is abandoned (the caller deletes nothing) and stopped by
:class:`InvocationTimeout`, raised in that thread at its next Python instruction. A request it
has on the wire is not taken back (GitHub or DynamoDB may apply it, as they may when Lambda stops
a runtime); it is a ``BaseException``, so no ``except Exception`` of the handler catches it and
nothing is released on the way out (a claim stays until it expires, as it does on AWS). Unlike
Lambda's, ``finally`` blocks still run.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")


class InvocationTimeout(BaseException):
    """The invocation passed its timeout: raised in its thread to stop it where it is."""


@dataclass
class Invocation(Generic[T]):
    """One run of a handler: its answer once it answered, or abandoned at its timeout."""

    thread: threading.Thread | None = None
    answer: T | None = None
    error: BaseException | None = None
    #: Set when the handler's thread has ended (answered, failed or stopped).
    ended: threading.Event = field(default_factory=threading.Event)
    abandoned: bool = False


def invoke(call: Callable[[], T], timeout: float) -> Invocation[T]:
    """Run ``call`` as one Lambda invocation of at most ``timeout`` seconds.

    Returns once it ended or was abandoned: ``answer`` (or ``error``, which the caller raises as
    Lambda reports a function's error) when it ended in time; ``abandoned`` when it did not, its
    thread then stopped by :class:`InvocationTimeout` (``ended`` is set once it is).
    """
    invocation: Invocation[T] = Invocation()

    def run() -> None:
        try:
            invocation.answer = call()
        except BaseException as exc:
            invocation.error = exc
        finally:
            invocation.ended.set()

    thread = threading.Thread(target=run, name="lambda-invocation", daemon=True)
    invocation.thread = thread
    thread.start()
    if invocation.ended.wait(timeout):
        return invocation
    invocation.abandoned = True
    _stop(thread)
    return invocation


def _stop(thread: threading.Thread) -> None:
    """Raise :class:`InvocationTimeout` in ``thread`` (at its next Python instruction)."""
    ident = thread.ident
    if ident is None or not thread.is_alive():
        return
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), ctypes.py_object(InvocationTimeout))
