"""Every AWS call a process makes, counted through botocore's built-in event handlers.

The router's adapters build their boto3 clients lazily (and Powertools' idempotency layer
builds its own from a new session), so counting on one client is not enough: the hooks are
added to botocore's built-in handlers, which every session created afterwards registers
(moto installs its stubber the same way).

For DynamoDB the items each call reads and writes are looked up in moto's in-process backend
(before and after a write), which gives their sizes and so an estimate of the capacity units
on-demand billing would charge; the adapter does not ask for ``ReturnConsumedCapacity``.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import boto3
from botocore import handlers

READ_UNIT_BYTES = 4096
WRITE_UNIT_BYTES = 1024
INDEX_KEY = "GSI1PK"  # the registry's one global secondary index (projection ALL)


@dataclass
class DynamoUsage:
    """Items and estimated on-demand capacity of the DynamoDB calls since the last reset."""

    items_read: int = 0
    items_written: int = 0
    items_checked: int = 0  # ConditionCheck items of TransactWriteItems
    bytes_read: int = 0
    bytes_written: int = 0
    read_units: float = 0.0
    write_units: float = 0.0
    index_write_units: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "items": {"read": self.items_read, "written": self.items_written, "checked": self.items_checked},
            "item_bytes": {"read": self.bytes_read, "written": self.bytes_written},
            "capacity_estimate": {
                "rru": round(self.read_units, 1),
                "wru": round(self.write_units, 1),
                "wru_index": round(self.index_write_units, 1),
            },
        }


@dataclass
class _Target:
    kind: str  # Put, Update, Delete or ConditionCheck
    table: str
    key: dict[str, Any]
    size_before: int
    index_before: Any


@dataclass
class AwsCalls:
    """Counts (service, operation) of every call; DynamoDB items via moto's backend."""

    region: str = "us-east-1"
    calls: Counter[tuple[str, str]] = field(default_factory=Counter)
    dynamo: DynamoUsage = field(default_factory=DynamoUsage)
    _pending: list[tuple[str, dict[str, Any], list[_Target]]] = field(default_factory=list)
    #: The thread whose calls count (the one that installed the hooks): moto's Step Functions
    #: interpreter runs each execution in a thread of its own, and its calls are AWS's, not ours.
    _thread: int | None = None
    _aside: bool = False

    def reset(self) -> None:
        self.calls.clear()
        self.dynamo = DynamoUsage()

    def operations(self, service: str) -> dict[str, int]:
        return {op: n for (svc, op), n in sorted(self.calls.items()) if svc == service}

    @contextmanager
    def aside(self) -> Iterator[None]:
        """Calls made inside are not counted (the harness's own: reading a queue, a history)."""
        self._aside = True
        try:
            yield
        finally:
            self._aside = False

    def _counts(self) -> bool:
        return not self._aside and self._thread in (None, threading.get_ident())

    # --- the hooks -------------------------------------------------------------------------

    def _before(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        if not self._counts():
            return
        service = model.service_model.service_name
        self.calls[(service, model.name)] += 1
        if service == "dynamodb":
            self._pending.append((model.name, params, self._targets(model.name, params)))

    def _after(self, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        if not self._counts():
            return
        if model.service_model.service_name != "dynamodb" or not self._pending:
            return
        operation, params, targets = self._pending.pop()
        if operation != model.name:
            return  # not ours to pair (never seen: calls here are one at a time)
        usage = self.dynamo
        factor = 1.0 if params.get("ConsistentRead") else 0.5
        if operation == "GetItem":
            size = self._size_of(params["TableName"], parsed.get("Item"))
            usage.items_read += "Item" in parsed
            usage.bytes_read += size
            usage.read_units += max(1, math.ceil(size / READ_UNIT_BYTES)) * factor
        elif operation in ("Query", "Scan"):
            sizes = [self._size_of(params["TableName"], item) for item in parsed.get("Items", [])]
            usage.items_read += len(sizes)
            usage.bytes_read += sum(sizes)
            # A query is billed on the sum of the items' sizes, rounded up once (an index: EC).
            usage.read_units += max(1, math.ceil(sum(sizes) / READ_UNIT_BYTES)) * factor
        elif operation == "BatchGetItem":
            for table, items in parsed.get("Responses", {}).items():
                consistent = params["RequestItems"].get(table, {}).get("ConsistentRead")
                for item in items:
                    size = self._size_of(table, item)
                    usage.items_read += 1
                    usage.bytes_read += size
                    usage.read_units += max(1, math.ceil(size / READ_UNIT_BYTES)) * (
                        1.0 if consistent else 0.5
                    )
        transactional = 2 if operation == "TransactWriteItems" else 1
        for target in targets:
            size_after, index_after = self._peek(target.table, target.key)
            size = max(target.size_before, size_after)
            units = max(1, math.ceil(size / WRITE_UNIT_BYTES))
            if target.kind == "ConditionCheck":
                usage.items_checked += 1
                usage.write_units += transactional * units  # estimated as a transactional write
                continue
            usage.items_written += 1
            usage.bytes_written += size
            usage.write_units += transactional * units
            if target.index_before is not None or index_after is not None:
                moved = None not in (target.index_before, index_after) and target.index_before != index_after
                usage.index_write_units += units * (2 if moved else 1)

    # --- moto's backend ----------------------------------------------------------------------

    def _targets(self, operation: str, params: dict[str, Any]) -> list[_Target]:
        requests: list[tuple[str, dict[str, Any]]] = []
        if operation in ("PutItem", "UpdateItem", "DeleteItem"):
            requests.append((operation.removesuffix("Item"), params))
        elif operation == "TransactWriteItems":
            for item in params.get("TransactItems", []):
                requests.extend(item.items())
        targets = []
        for kind, request in requests:
            table = request["TableName"]
            key = request.get("Key") or self._key_of(table, request.get("Item") or {})
            size, index = self._peek(table, key)
            targets.append(_Target(kind, table, key, size, index))
        return targets

    def _backend(self) -> Any:
        from moto.core.models import DEFAULT_ACCOUNT_ID  # noqa: PLC0415 (moto only when counting)
        from moto.dynamodb.models import dynamodb_backends  # noqa: PLC0415

        return dynamodb_backends[DEFAULT_ACCOUNT_ID][self.region]

    def _key_of(self, table: str, item: dict[str, Any]) -> dict[str, Any]:
        schema = self._backend().get_table(table)
        names = [schema.hash_key_attr, schema.range_key_attr]
        return {name: item[name] for name in names if name and name in item}

    def _peek(self, table: str, key: dict[str, Any]) -> tuple[int, Any]:
        """(size in bytes, index key) of the stored item, (0, None) when there is none."""
        try:
            item = self._backend().get_item(table, key)
        except Exception:  # an invalid key: the call itself fails and writes nothing
            return 0, None
        if item is None:
            return 0, None
        index = item.attrs.get(INDEX_KEY)
        return int(item.size()), (index.value if index is not None else None)

    def _size_of(self, table: str, item: dict[str, Any] | None) -> int:
        """The whole stored item's size (reads are billed on it, whatever was projected)."""
        if not item:
            return 0
        return self._peek(table, self._key_of(table, item))[0]

    # --- installing -------------------------------------------------------------------------

    @contextmanager
    def installed(self) -> Iterator[AwsCalls]:
        """Count in every boto3 session created inside (the default one is made anew)."""
        hooks: list[tuple[str, Callable[..., None]]] = [
            ("before-parameter-build", self._before),
            ("after-call", self._after),
        ]
        saved = boto3.DEFAULT_SESSION
        self._thread = threading.get_ident()
        handlers.BUILTIN_HANDLERS.extend(hooks)
        boto3.DEFAULT_SESSION = None
        try:
            yield self
        finally:
            for hook in hooks:
                handlers.BUILTIN_HANDLERS.remove(hook)
            boto3.DEFAULT_SESSION = saved
            self._thread = None
