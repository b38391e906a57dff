"""The local stack's moto server, with DynamoDB's requests taken one at a time.

moto's server is threaded, and its ``TransactWriteItems`` is not atomic with respect to other
requests: it deep-copies the whole table, applies the transaction, and on a failed condition
puts the copy back — undoing any write another thread made in between. Real DynamoDB never
does that. It bit the local stack under load: a task's lease release, made while a router's
transaction was failing on that very release's version bump, was rolled back, so the agent's
next task found its lease held for fifteen minutes. Serializing DynamoDB's requests (each is
short) makes the stand-in keep the promise the product relies on.

Run as ``python -m squadron.adapters.moto_server -H 127.0.0.1 -p PORT`` (moto's own arguments).
"""

from __future__ import annotations

import functools
import sys
import threading
from typing import Any

from moto.dynamodb.responses import DynamoHandler
from moto.server import main

_ONE_AT_A_TIME = threading.RLock()


def serialized(call: Any) -> Any:
    """``call`` (a handler's action dispatch) holding the one DynamoDB lock."""

    @functools.wraps(call)
    def one_at_a_time(self: Any) -> Any:
        with _ONE_AT_A_TIME:
            return call(self)

    return one_at_a_time


def patch() -> None:
    """Serialize every DynamoDB request of this process (idempotent)."""
    if not getattr(DynamoHandler.call_action, "_serialized", False):
        wrapped = serialized(DynamoHandler.call_action)
        wrapped._serialized = True
        DynamoHandler.call_action = wrapped  # type: ignore[method-assign]


if __name__ == "__main__":  # pragma: no cover - the local stack's subprocess
    patch()
    main(sys.argv[1:])
