"""Change sets across repositories (the :class:`~squadron.registry_ports.ChangeSets` port;
docs/change-sets.md).

=====================================  =========================================  ==============
What                                   Item                                       Read with
=====================================  =========================================  ==============
a change set (its JSON and version)    ``CHANGESET#<id>`` / ``CHANGESET``         GetItem
every set, newest first                GSI ``by-status``: ``CHANGESETS`` /        Query on GSI
                                       ``<created>#<id>``
an installation's open sets (a count)  ``CHANGESETS#<installation>`` / ``OPEN``   GetItem
=====================================  =========================================  ==============

A set is written with its events in one TransactWriteItems: created on not existing and on its
installation's count staying under the bound, each step on the version read (so of two routers
approving at once one wins and the state never goes backwards).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from squadron.adapters.registry.keys import STATUS_INDEX, dump_item, iso, load_item
from squadron.adapters.registry.table import RegistryTable
from squadron.domain.change_sets import MAX_OPEN_PER_INSTALLATION, ChangeSet
from squadron.domain.domain_events import DomainEvent

#: The GSI partition every set is listed on (sets are few: at most 20 open per installation).
LISTING = "CHANGESETS"


def _key(set_id: str) -> dict[str, Any]:
    return dump_item({"PK": f"CHANGESET#{set_id}", "SK": "CHANGESET"})


def _count_key(installation_id: int) -> dict[str, Any]:
    return dump_item({"PK": f"CHANGESETS#{installation_id}", "SK": "OPEN"})


class DynamoChangeSets(RegistryTable):
    """One item per set (its JSON, its version), a count of open sets per installation."""

    def _item(self, change_set: ChangeSet) -> dict[str, Any]:
        return {
            "PK": f"CHANGESET#{change_set.id}",
            "SK": "CHANGESET",
            "entity": "change_set",
            "version": change_set.version,
            "state": str(change_set.state),
            "installation_id": change_set.installation_id,
            "body": change_set.model_dump_json(),
            "GSI1PK": LISTING,
            "GSI1SK": f"{iso(change_set.created_at)}#{change_set.id}",
        }

    def _events(self, events: Sequence[DomainEvent]) -> list[tuple[str, dict[str, Any], str]]:
        return [("Put", self._event_put(event), f"event {event.id}: already stored") for event in events]

    def _count(self, installation_id: int, delta: int) -> tuple[str, dict[str, Any], str]:
        update: dict[str, Any] = {
            "TableName": self.table_name,
            "Key": _count_key(installation_id),
            "UpdateExpression": "ADD #open :delta",
            "ExpressionAttributeNames": {"#open": "open"},
            "ExpressionAttributeValues": {":delta": {"N": str(delta)}},
        }
        if delta > 0:
            update["ConditionExpression"] = "attribute_not_exists(#open) OR #open < :max"
            update["ExpressionAttributeValues"][":max"] = {"N": str(MAX_OPEN_PER_INSTALLATION)}
        return (
            "Update",
            update,
            f"installation {installation_id}: {MAX_OPEN_PER_INSTALLATION} change sets are open",
        )

    def create_change_set(self, change_set: ChangeSet, events: Sequence[DomainEvent]) -> None:
        put = {
            "TableName": self.table_name,
            "Item": dump_item(self._item(change_set)),
            "ConditionExpression": "attribute_not_exists(PK)",
        }
        parts = [("Put", put, f"change set {change_set.id}: already exists")]
        if not change_set.over:
            parts.append(self._count(change_set.installation_id, 1))
        self._transact([*parts, *self._events(events)])

    def save_change_set(self, before: ChangeSet, after: ChangeSet, events: Sequence[DomainEvent]) -> None:
        if after.id != before.id or after.version <= before.version:
            raise ValueError(f"{after.id} v{after.version} is not a step of {before.id} v{before.version}")
        put = {
            "TableName": self.table_name,
            "Item": dump_item(self._item(after)),
            "ConditionExpression": "version = :expected",
            "ExpressionAttributeValues": {":expected": {"N": str(before.version)}},
        }
        parts = [("Put", put, f"change set {after.id}: expected version {before.version}")]
        if after.over and not before.over:
            parts.append(self._count(after.installation_id, -1))
        self._transact([*parts, *self._events(events)])

    def get_change_set(self, set_id: str) -> ChangeSet | None:
        response = self._call("get_item", TableName=self.table_name, Key=_key(set_id), ConsistentRead=True)
        item = response.get("Item")
        return None if item is None else ChangeSet.model_validate_json(str(load_item(item)["body"]))

    def change_sets(self, limit: int = 50) -> list[ChangeSet]:
        found: list[ChangeSet] = []
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": STATUS_INDEX,
            "KeyConditionExpression": "GSI1PK = :pk",
            "ExpressionAttributeValues": {":pk": {"S": LISTING}},
            "ScanIndexForward": False,
        }
        while len(found) < limit:
            page = self._call("query", **request, Limit=limit - len(found))
            found += [ChangeSet.model_validate_json(str(load_item(i)["body"])) for i in page.get("Items", [])]
            if "LastEvaluatedKey" not in page:
                break
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return found

    def open_change_sets(self, installation_id: int) -> int:
        response = self._call(
            "get_item", TableName=self.table_name, Key=_count_key(installation_id), ConsistentRead=True
        )
        return int(load_item(response.get("Item") or {}).get("open", 0))
