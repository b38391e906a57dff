"""A repository's committed domain events by time (the :class:`~squadron.registry_ports.History` port)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from squadron.adapters.registry.keys import STATUS_INDEX, deserializer, dump_item, history_pk, history_time
from squadron.adapters.registry.table import RegistryTable
from squadron.domain.domain_events import DomainEvent
from squadron.domain.history import MAX_HISTORY_EVENTS, check_period


class DynamoHistory(RegistryTable):
    """One Query on the history index, paged."""

    #: Events one history Query page asks for (DynamoDB also cuts a page at 1 MB).
    HISTORY_PAGE = 1000

    def history(
        self, repo_id: int, start: datetime, end: datetime, limit: int = MAX_HISTORY_EVENTS
    ) -> list[DomainEvent]:
        """The repository's committed events of ``[start, end)``, oldest first (at most ``limit``).

        One Query on the history index, paged: its sort key is the event's time then its id, so
        the index returns them in order and the bounds are key conditions (an event exactly at
        ``end`` sorts after ``<end>`` and is left out). The index is eventually consistent: an
        event committed a moment ago may be missing. An event past its retention may linger
        until DynamoDB's TTL deletes it (within days of expiry), so a period older than the
        retention is incomplete. ``limit`` events returned may mean more exist after them.
        """
        check_period(start, end)
        if limit < 1:
            raise ValueError(f"history limit must be at least 1, got {limit}")
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": STATUS_INDEX,
            "KeyConditionExpression": "GSI1PK = :pk AND GSI1SK BETWEEN :start AND :end",
            "ExpressionAttributeValues": dump_item(
                {":pk": history_pk(repo_id), ":start": history_time(start), ":end": history_time(end)}
            ),
            "ProjectionExpression": "#detail",
            "ExpressionAttributeNames": {"#detail": "detail"},
        }
        found: list[DomainEvent] = []
        while len(found) < limit:
            page = self._call("query", **request, Limit=min(limit - len(found), self.HISTORY_PAGE))
            for item in page.get("Items", []):
                found.append(DomainEvent.from_stored(str(deserializer.deserialize(item["detail"]))))
            if "LastEvaluatedKey" not in page:
                break
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return found[:limit]

    def record_event(self, event: DomainEvent) -> bool:
        """One conditional PutItem (the event's id not stored yet): published from the stream once."""
        try:
            self._call("put_item", **self._event_put(event))
        except ClientError:  # the condition: stored already (any other error is raised by _call)
            return False
        return True
