"""Pipelines' human stages waiting for people (the :class:`~squadron.registry_ports.HumanWaits` port).

One item per wait, in its issue's own partition of waits (``WAIT#<repo>#<number>`` / the task's
entry), apart from the issue's partition (:meth:`issue_view` reads that one whole): what the wait
is (JSON), who counted (a string set: DynamoDB's ``ADD`` keeps each login once), the answer kept
before it is sent, whether it was, and whether its task was over when it was (``gone``). Kept
until the longest run is over (TTL).
"""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from squadron.adapters.registry.keys import TTL_ATTRIBUTE, dump_item, error_code, load_item
from squadron.adapters.registry.table import DynamoTable
from squadron.domain.agents import ConflictError
from squadron.domain.pipelines.humans import HumanWait

WAIT_ENTITY = "human_wait"


def wait_pk(repo_id: int, number: int) -> str:
    return f"WAIT#{repo_id}#{number}"


def _wait(item: dict[str, Any]) -> HumanWait:
    value = json.loads(str(item["wait"]))
    value["counted"] = tuple(sorted(item.get("counted") or (), key=str.casefold))
    answer = item.get("answer")
    value["answer"] = json.loads(str(answer)) if answer is not None else None
    value["sent"] = bool(item.get("sent", False))
    value["gone"] = bool(item.get("gone", False))
    return HumanWait.model_validate(value)


class DynamoHumanWaits(DynamoTable):
    """Conditional writes on one item per wait; every read is a Query of the issue's waits."""

    def open_wait(self, wait: HumanWait) -> HumanWait:
        static = wait.model_dump(mode="json", exclude={"counted", "answer", "sent", "gone"})
        item = {
            "PK": wait_pk(wait.repo_id, wait.number),
            "SK": wait.entry,
            "entity": WAIT_ENTITY,
            "wait": json.dumps(static, separators=(",", ":"), sort_keys=True),
            "sent": False,
            TTL_ATTRIBUTE: int(wait.expires_at.timestamp()),
        }
        try:
            self._call(
                "put_item",
                TableName=self.table_name,
                Item=dump_item(item),
                ConditionExpression="attribute_not_exists(PK)",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            held = exc.response.get("Item")
            if held:
                return _wait(load_item(held))  # type: ignore[arg-type]
            raise  # pragma: no cover - DynamoDB returns the item it kept
        return wait.model_copy(update={"counted": (), "answer": None, "sent": False, "gone": False})

    def open_waits(self, repo_id: int, number: int) -> list[HumanWait]:
        items = self._query(
            KeyConditionExpression="PK = :pk",
            FilterExpression="#sent = :false",
            ExpressionAttributeNames={"#sent": "sent"},
            ExpressionAttributeValues=dump_item({":pk": wait_pk(repo_id, number), ":false": False}),
            ConsistentRead=True,
        )
        waits = [_wait(item) for item in items if item.get("entity") == WAIT_ENTITY]
        return sorted(waits, key=lambda wait: (wait.opened_at, wait.entry))

    def count_toward(self, repo_id: int, number: int, entry: str, login: str) -> HumanWait | None:
        try:
            answer = self._call(
                "update_item",
                TableName=self.table_name,
                Key=dump_item({"PK": wait_pk(repo_id, number), "SK": entry}),
                UpdateExpression="ADD counted :login",
                ConditionExpression="attribute_exists(PK)",
                ExpressionAttributeValues={":login": {"SS": [login]}},
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return None
            raise
        return _wait(load_item(answer["Attributes"]))

    def keep_answer(self, repo_id: int, number: int, entry: str, answer: dict[str, Any]) -> HumanWait:
        key = dump_item({"PK": wait_pk(repo_id, number), "SK": entry})
        try:
            done = self._call(
                "update_item",
                TableName=self.table_name,
                Key=key,
                UpdateExpression="SET answer = :answer",
                ConditionExpression="attribute_exists(PK) AND attribute_not_exists(answer)",
                ExpressionAttributeValues=dump_item(
                    {":answer": json.dumps(answer, separators=(",", ":"), sort_keys=True)}
                ),
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            held = self._call("get_item", TableName=self.table_name, Key=key, ConsistentRead=True).get("Item")
            if not held:
                raise ConflictError(f"human wait {entry} of #{number}", "does not exist") from exc
            return _wait(load_item(held))
        return _wait(load_item(done["Attributes"]))

    def close_wait(self, repo_id: int, number: int, entry: str) -> None:
        self._set(repo_id, number, entry, "sent")

    def mark_gone(self, repo_id: int, number: int, entry: str) -> None:
        self._set(repo_id, number, entry, "gone")

    def _set(self, repo_id: int, number: int, entry: str, flag: str) -> None:
        """Set the wait's ``flag`` (nothing when there is no such wait)."""
        try:
            self._call(
                "update_item",
                TableName=self.table_name,
                Key=dump_item({"PK": wait_pk(repo_id, number), "SK": entry}),
                UpdateExpression="SET #flag = :true",
                ConditionExpression="attribute_exists(PK)",
                ExpressionAttributeNames={"#flag": flag},
                ExpressionAttributeValues=dump_item({":true": True}),
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise  # pragma: no cover - _call names every other error
