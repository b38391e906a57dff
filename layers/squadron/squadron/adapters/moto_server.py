"""The local stack's moto server, with DynamoDB's requests taken one at a time.

moto's server is threaded, and its ``TransactWriteItems`` is not atomic with respect to other
requests: it deep-copies the whole table, applies the transaction, and on a failed condition
puts the copy back — undoing any write another thread made in between. Real DynamoDB never
does that. It bit the local stack under load: a task's lease release, made while a router's
transaction was failing on that very release's version bump, was rolled back, so the agent's
next task found its lease held for fifteen minutes. Serializing DynamoDB's requests (each is
short), and its streams' with them, makes the stand-in keep the promise the product relies on.

Run as ``python -m squadron.adapters.moto_server -H 127.0.0.1 -p PORT`` (moto's own arguments).
"""

from __future__ import annotations

import functools
import sys
import threading
from typing import Any

from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.responses import DynamoHandler
from moto.dynamodbstreams.responses import DynamoDBStreamsHandler
from moto.server import main

_ONE_AT_A_TIME = threading.RLock()


def serialized(call: Any) -> Any:
    """``call`` (a handler's action dispatch) holding the one DynamoDB lock."""

    @functools.wraps(call)
    def one_at_a_time(self: Any) -> Any:
        with _ONE_AT_A_TIME:
            return call(self)

    return one_at_a_time


#: The handlers taken one at a time: DynamoDB's, and its streams' (a stream read in the middle of
#: a transaction that then fails would see records the roll-back removes, and its iterator would
#: skip the records that later take their sequence numbers: events never published).
SERIALIZED: tuple[type[Any], ...] = (DynamoHandler, DynamoDBStreamsHandler)


def keeping_streams(transact: Any) -> Any:
    """``transact`` (TransactWriteItems) with each table's stream shard kept across a roll-back.

    moto rolls a failed transaction back by replacing each table with a copy taken before it;
    the copy has a stream shard of its own, so every shard iterator handed out before (the
    publisher's) kept reading the old one, which receives nothing again: no domain event was
    published after the first cancelled transaction. The live shard object stays, with the
    copy's records.
    """

    @functools.wraps(transact)
    def keeping(self: Any, *args: Any, **kwargs: Any) -> Any:
        shards = {name: table.stream_shard for name, table in self.tables.items()}
        try:
            return transact(self, *args, **kwargs)
        finally:
            for name, table in self.tables.items():
                kept = shards.get(name)
                if kept is not None and table.stream_shard is not kept and table.stream_shard is not None:
                    kept.items = table.stream_shard.items
                    kept.table = table
                    table.stream_shard = kept

    return keeping


def patch() -> None:
    """Serialize every DynamoDB and DynamoDB Streams request of this process, and keep streams
    across a failed transaction's roll-back (idempotent)."""
    for handler in SERIALIZED:
        if not getattr(handler.call_action, "_serialized", False):
            wrapped = serialized(handler.call_action)
            wrapped._serialized = True
            handler.call_action = wrapped
    if not getattr(DynamoDBBackend.transact_write_items, "_keeping", False):
        keeping = keeping_streams(DynamoDBBackend.transact_write_items)
        keeping._keeping = True
        DynamoDBBackend.transact_write_items = keeping  # type: ignore[method-assign]


if __name__ == "__main__":  # pragma: no cover - the local stack's subprocess
    patch()
    main(sys.argv[1:])
