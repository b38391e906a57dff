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

import copy
import functools
import os
import sys
import threading
from typing import Any

import moto.dynamodb.models as dynamodb_models
import moto.server
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType
from moto.dynamodb.models.table import Table
from moto.dynamodb.responses import DynamoHandler
from moto.dynamodbstreams.responses import DynamoDBStreamsHandler
from moto.server import main

from squadron.adapters import moto_clock, moto_step_functions

ONE_AT_A_TIME = threading.RLock()


def serialized(call: Any) -> Any:
    """``call`` (a handler's action dispatch) holding the one DynamoDB lock."""

    @functools.wraps(call)
    def one_at_a_time(self: Any) -> Any:
        with ONE_AT_A_TIME:
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


class _TablesByReference:
    """What moto's DynamoDB models module sees as ``copy``: a table is "copied" by reference (the
    transaction's roll-back is done item by item by :func:`undone_by_item`), anything else deeply."""

    @staticmethod
    def deepcopy(value: Any, memo: dict[int, Any] | None = None) -> Any:
        return value if isinstance(value, Table) else copy.deepcopy(value, memo)


def _touched(backend: Any, transact_items: list[dict[str, Any]]) -> list[tuple[Table, Any, Any]]:
    """The (table, hash, range) of each item a transaction names (malformed ones are moto's to refuse)."""
    touched = []
    for entry in transact_items:
        try:
            _, op = next(iter(entry.items()))
            table = backend.tables[op["TableName"]]
            attrs = op.get("Item") or op.get("Key") or {}
            hash_value = DynamoType(attrs[table.hash_key_attr])
            range_value = DynamoType(attrs[table.range_key_attr]) if table.range_key_attr else None
        except (KeyError, TypeError, AttributeError, StopIteration):
            continue
        touched.append((table, hash_value, range_value))
    return touched


def undone_by_item(transact: Any) -> Any:
    """``transact`` (TransactWriteItems) rolled back item by item rather than by moto's deep copy
    of every table it names, taken before each transaction.

    That copy made each transaction cost as much as the whole table (the domain events' history
    lives in it): most of a busy local stack's time went into copying. With DynamoDB's requests
    serialized (above) nothing else runs during a transaction, so restoring the items it names
    and cutting the stream back to its length before is the same roll-back, at the cost of the
    items touched.
    """

    @functools.wraps(transact)
    def by_item(self: Any, transact_items: list[dict[str, Any]]) -> Any:
        touched = _touched(self, transact_items)
        before = [(table, h, r, copy.deepcopy(table.get_item(h, r))) for table, h, r in touched]
        streams = {
            id(t): (t.stream_shard, len(t.stream_shard.items)) for t, _, _ in touched if t.stream_shard
        }
        try:
            return transact(self, transact_items)
        except BaseException:
            for table, hash_value, range_value, item in reversed(before):
                if range_value is None:
                    if item is None:
                        table.items.pop(hash_value, None)
                    else:
                        table.items[hash_value] = item
                elif item is None:
                    if hash_value in table.items:
                        table.items[hash_value].pop(range_value, None)
                else:
                    table.items[hash_value][range_value] = item
            for shard, length in streams.values():
                del shard.items[length:]
            raise

    return by_item


def patch() -> None:
    """Serialize every DynamoDB and DynamoDB Streams request of this process, roll a failed
    transaction back item by item, and keep streams across a roll-back; let Step Functions start
    versions and child executions (:mod:`squadron.adapters.moto_step_functions`) (idempotent)."""
    moto_step_functions.patch()
    patch_dynamodb()


def patch_dynamodb() -> None:
    """:func:`patch`'s DynamoDB part alone (idempotent): the test suite's in-process moto takes it
    too (tests/support/moto_transactions.py), so a test's moto is the local stack's."""
    for handler in SERIALIZED:
        if not getattr(handler.call_action, "_serialized", False):
            wrapped = serialized(handler.call_action)
            wrapped._serialized = True
            handler.call_action = wrapped
    if not getattr(DynamoDBBackend.transact_write_items, "_keeping", False):
        keeping = keeping_streams(DynamoDBBackend.transact_write_items)
        keeping._keeping = True
        DynamoDBBackend.transact_write_items = keeping  # type: ignore[method-assign]
    if not getattr(DynamoDBBackend.transact_write_items, "_by_item", False):
        by_item = undone_by_item(DynamoDBBackend.transact_write_items)
        by_item._by_item = True
        DynamoDBBackend.transact_write_items = by_item  # type: ignore[method-assign]
        setattr(dynamodb_models, "copy", _TablesByReference)  # noqa: B010 - a module of moto's, not ours


def exit_at_once(signum: int, frame: object) -> None:
    """SIGTERM's and SIGINT's handler: the process ends now, its output flushed.

    moto's own handler raises ``SystemExit``, and the interpreter's finalization (its request
    threads joined, thousands of moto's modules torn down) took two seconds of every local stack's
    stop. The server keeps nothing worth that: the stack saves its state through the API before it
    stops the server (:func:`squadron.adapters.local_aws.save_state`)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":  # pragma: no cover - the local stack's subprocess
    patch()
    moto.server.signal_handler = exit_at_once  # what moto's main installs for SIGTERM and SIGINT
    # The local stack's test clock, when it asks for one (docs/local-stack.md).
    moto_clock.compress_waits(moto_clock.scale_of(os.environ))
    main(sys.argv[1:])
