"""moto's TransactWriteItems, with its rollback snapshot taken once per table instead of once per item.

moto 5 backs up a table before a transaction by deep-copying it again for every item of the
transaction that names it (``DynamoDBBackend.transact_write_items``): a decision of 100 items
copied the whole registry table 100 times, every item of it each time, and the tests of large
decisions spent most of their time there (the 100-item fault test: 11 of its 57 s under a profiler
went to those copies). The copies are all taken before the transaction writes anything, so they
are equal: the first one serves for the rest. What a transaction does, commits or rolls back is
moto's own code, unchanged.
"""

from __future__ import annotations

import copy
import threading
from types import SimpleNamespace
from typing import Any

from moto.dynamodb import models
from moto.dynamodb.models.table import Table

_taking = threading.local()


def _deepcopy(value: Any, memo: dict[int, Any] | None = None) -> Any:
    taken: dict[int, tuple[Any, Any]] | None = getattr(_taking, "snapshots", None)
    if taken is None or not isinstance(value, Table):
        return copy.deepcopy(value, memo)
    if id(value) not in taken:
        taken[id(value)] = (value, copy.deepcopy(value, memo))  # the table kept: its id stays its own
    return taken[id(value)][1]


_transact_write_items = models.DynamoDBBackend.transact_write_items


def _transact_write_items_snapshot_once(self: Any, transact_items: list[dict[str, Any]]) -> None:
    _taking.snapshots = {}
    try:
        _transact_write_items(self, transact_items)
    finally:
        _taking.snapshots = None


def install() -> None:
    """From now on in this process (moto's in-process ``mock_aws``)."""
    setattr(models, "copy", SimpleNamespace(deepcopy=_deepcopy))  # noqa: B010 - a module of moto's, not ours
    models.DynamoDBBackend.transact_write_items = _transact_write_items_snapshot_once  # type: ignore[method-assign]
