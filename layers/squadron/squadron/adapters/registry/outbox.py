"""Who carries out a committed decision, and what of it is settled: on the decision's own item.

The decision record (``DECISION#<key>`` / ``DECISION``, written by
:meth:`~squadron.adapters.registry.decisions.DynamoDecisions.commit`) also holds:

==================  ====================================================================
``runner``          the executor holding the claim (a random id per executor)
``runner_until``    when the claim expires (epoch seconds)
``attempts``        claims so far
``settled``         indexes of the effects carried out or refused for good (a number set)
``last_error``      what made the last executor stop
``GSI1SK``          on the open index: the time of the last claim, so the sweep leaves a
                    decision alone while it is tried, and takes the longest untouched first
==================  ====================================================================

An effect GitHub refused for good is also an item of its own, ``DECISION#<key>`` /
``FAILED#<index>``, on the index ``FAILED#<repo>`` by time: what ``squadron status`` and the
dashboard issue show. It is written with the effect's "settled" in one transaction.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from squadron.adapters.registry.keys import STATUS_INDEX
from squadron.adapters.registry.table import RegistryTable
from squadron.domain.outbox import EXECUTION_LEASE, Claim, FailedEffect

#: How long a failed effect's item is kept (the decision record's own retention).
FAILED_RETENTION_DAYS = 14
_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


def _dump(values: dict[str, Any]) -> dict[str, Any]:
    return {k: _serializer.serialize(v) for k, v in values.items()}


def _iso(at: datetime) -> str:
    """As the registry writes decision times (``Z`` for UTC), so the open index sorts as one."""
    text = at.astimezone(UTC).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def _key(decision: str) -> dict[str, Any]:
    return _dump({"PK": f"DECISION#{decision}", "SK": "DECISION"})


def failed_pk(repo_id: int) -> str:
    return f"FAILED#{repo_id}"


class DecisionOutbox(RegistryTable):
    """The claim and progress of decisions (the :class:`~squadron.registry_ports.Outbox` port)."""

    def claim_decision(self, key: str, owner: str, now: datetime) -> Claim | None:
        """Hold decision ``key`` for :data:`EXECUTION_LEASE`, or None: it is done, unknown, or
        another executor's unexpired claim holds it."""
        try:
            answer = self._call(
                "update_item",
                TableName=self.table_name,
                Key=_key(key),
                UpdateExpression=(
                    "SET runner = :me, runner_until = :until, GSI1SK = :touched ADD attempts :one"
                ),
                ConditionExpression=(
                    "attribute_exists(PK) AND done = :open AND "
                    "(attribute_not_exists(runner_until) OR runner_until <= :now OR runner = :me)"
                ),
                ExpressionAttributeValues=_dump(
                    {
                        ":me": owner,
                        ":until": int((now + EXECUTION_LEASE).timestamp()),
                        ":now": int(now.timestamp()),
                        ":touched": f"{_iso(now)}#{key}",
                        ":one": 1,
                        ":open": False,
                    }
                ),
                ReturnValues="ALL_NEW",
            )
        except ClientError:
            return None
        item = {k: _deserializer.deserialize(v) for k, v in answer["Attributes"].items()}
        return Claim(
            owner=owner,
            attempts=int(item.get("attempts", 1)),
            settled=frozenset(int(i) for i in item.get("settled", set())),
            last_error=str(item.get("last_error") or ""),
        )

    def _settle(self, key: str, owner: str, index: int) -> dict[str, Any]:
        return {
            "TableName": self.table_name,
            "Key": _key(key),
            "UpdateExpression": "ADD settled :i",
            "ConditionExpression": "runner = :me",
            "ExpressionAttributeValues": _dump({":i": {index}, ":me": owner}),
        }

    def settle_effect(self, key: str, owner: str, index: int) -> bool:
        """Record effect ``index`` as carried out; False when ``owner`` no longer holds the claim."""
        try:
            self._call("update_item", **self._settle(key, owner, index))
        except ClientError:
            return False
        return True

    def fail_effect(self, key: str, owner: str, failed: FailedEffect) -> bool:
        """Record ``failed`` (settled: never tried again) and show it to operators, at once;
        False when ``owner`` no longer holds the claim."""
        item = {
            "PK": f"DECISION#{key}",
            "SK": f"FAILED#{failed.index}",
            "entity": "failed_effect",
            "decision": key,
            "index": failed.index,
            "effect": failed.effect,
            "repo_id": failed.repo_id,
            "repo_full_name": failed.repo_full_name,
            "number": failed.number,
            "reason": failed.reason,
            "at": _iso(failed.at),
            "GSI1PK": failed_pk(failed.repo_id),
            "GSI1SK": f"{_iso(failed.at)}#{key}#{failed.index}",
            "expires_at": int(failed.at.timestamp()) + FAILED_RETENTION_DAYS * 86_400,
        }
        try:
            self._call(
                "transact_write_items",
                TransactItems=[
                    {"Update": self._settle(key, owner, failed.index)},
                    {"Put": {"TableName": self.table_name, "Item": _dump(item)}},
                ],
            )
        except ClientError:
            return False
        return True

    def release_decision(self, key: str, owner: str, error: str) -> None:
        """Give the claim up at once (the next executor need not wait for it to expire), saying why."""
        try:
            self._call(
                "update_item",
                TableName=self.table_name,
                Key=_key(key),
                UpdateExpression="SET last_error = :e REMOVE runner, runner_until",
                ConditionExpression="runner = :me",
                ExpressionAttributeValues=_dump({":e": error[:300], ":me": owner}),
            )
        except ClientError:
            return  # another executor holds it now: its claim stands

    def failed_effects(self, repo_id: int, limit: int = 20) -> list[FailedEffect]:
        """The repository's effects refused for good, newest first."""
        answer = self._call(
            "query",
            TableName=self.table_name,
            IndexName=STATUS_INDEX,
            KeyConditionExpression="GSI1PK = :pk",
            ExpressionAttributeValues=_dump({":pk": failed_pk(repo_id)}),
            ScanIndexForward=False,
            Limit=limit,
        )
        found = []
        for raw in answer.get("Items", []):
            item = {k: _deserializer.deserialize(v) for k, v in raw.items()}
            number = item.get("number")
            found.append(
                FailedEffect(
                    decision=str(item["decision"]),
                    index=int(item["index"]),
                    effect=str(item["effect"]),
                    repo_id=int(item["repo_id"]),
                    repo_full_name=str(item["repo_full_name"]),
                    number=int(number) if number is not None else None,
                    reason=str(item["reason"]),
                    at=datetime.fromisoformat(str(item["at"]).replace("Z", "+00:00")),
                )
            )
        return found
