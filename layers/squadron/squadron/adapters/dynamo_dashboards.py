"""Each repository's dashboard slot on the registry's table: the
:class:`~squadron.ports.DashboardSlots` port (see :mod:`squadron.domain.dashboard_refresh`).

=====================================  =========================================  ==============
What                                   Item                                       Written with
=====================================  =========================================  ==============
when a dashboard was last rendered,    ``DASHBOARD#<r>`` / ``SLOT``               UpdateItem
and when its deferred rendering is due                                             (conditional)
=====================================  =========================================  ==============

Times are epoch milliseconds (numbers compare as the times do). A claim is one UpdateItem
conditional on the last rendering being old enough, whose refusal carries the item
(``ReturnValuesOnConditionCheckFailure``), so a lost claim costs no second read. The item has
no ``entity`` of an event: the stream's filter never publishes it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from squadron.adapters.dynamo_registry import DynamoTable, dump_item, load_item
from squadron.ports import RenderClaim

ENTITY = "dashboard"


def dashboard_pk(repo_id: int) -> str:
    return f"DASHBOARD#{repo_id}"


def _ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def _time(ms: object) -> datetime | None:
    return None if ms is None else datetime.fromtimestamp(int(str(ms)) / 1000, UTC)


def _key(repo_id: int) -> dict[str, Any]:
    return dump_item({"PK": dashboard_pk(repo_id), "SK": "SLOT"})


class DynamoDashboardSlots(DynamoTable):
    """The dashboards' slots (:class:`~squadron.ports.DashboardSlots`) on the registry's table."""

    def claim(self, repo_id: int, now: datetime, cutoff: datetime) -> RenderClaim:
        try:
            answer = self._call(
                "update_item",
                TableName=self.table_name,
                Key=_key(repo_id),
                UpdateExpression="SET rendered_ms = :now, entity = :e REMOVE deferred_ms",
                ConditionExpression="attribute_not_exists(rendered_ms) OR rendered_ms <= :cutoff",
                ExpressionAttributeValues=dump_item({":now": _ms(now), ":cutoff": _ms(cutoff), ":e": ENTITY}),
                ReturnValues="UPDATED_OLD",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            old = load_item(exc.response.get("Item") or {})  # type: ignore[arg-type]
            return RenderClaim(False, _time(old.get("rendered_ms")))
        return RenderClaim(True, now, _time(load_item(answer.get("Attributes") or {}).get("rendered_ms")))

    def release(self, repo_id: int, claimed_at: datetime, previous: datetime | None) -> None:
        update = "REMOVE rendered_ms" if previous is None else "SET rendered_ms = :previous"
        values = {":mine": _ms(claimed_at), **({} if previous is None else {":previous": _ms(previous)})}
        try:
            self._call(
                "update_item",
                TableName=self.table_name,
                Key=_key(repo_id),
                UpdateExpression=update,
                ConditionExpression="rendered_ms = :mine",
                ExpressionAttributeValues=dump_item(values),
            )
        except ClientError:
            return  # claimed again since: that claim stands

    def defer(self, repo_id: int, until: datetime, now: datetime, *, again: bool = False) -> bool:
        condition = (
            {}
            if again
            else {"ConditionExpression": "attribute_not_exists(deferred_ms) OR deferred_ms < :now"}
        )
        values = {":until": _ms(until), ":e": ENTITY, **({} if again else {":now": _ms(now)})}
        try:
            self._call(
                "update_item",
                TableName=self.table_name,
                Key=_key(repo_id),
                UpdateExpression="SET deferred_ms = :until, entity = :e",
                ExpressionAttributeValues=dump_item(values),
                **condition,
            )
        except ClientError:
            return False  # a deferred rendering is queued and not due yet: it covers this request
        return True
