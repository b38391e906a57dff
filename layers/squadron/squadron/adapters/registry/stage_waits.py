"""Pipeline agent stages' task tokens, one wait per agent (the
:class:`~squadron.registry_ports.StageWaits` port; :mod:`squadron.domain.pipelines.agent_stage`)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from botocore.exceptions import ClientError

from squadron.adapters.registry.keys import TTL_ATTRIBUTE, dump_item, load_item
from squadron.adapters.registry.table import RegistryTable
from squadron.domain.pipelines.agent_stage import StageWait
from squadron.domain.pipelines.limits import MAX_RUN_TIME

#: A wait outlives the longest run (its token cannot be answered after): then DynamoDB drops it.
WAIT_RETENTION = timedelta(seconds=MAX_RUN_TIME) + timedelta(days=1)


def _key(agent_id: str) -> dict[str, Any]:
    return dump_item({"PK": f"STAGEWAIT#{agent_id}", "SK": "wait"})


def _load(item: dict[str, Any]) -> StageWait:
    held = load_item(item)
    answer = held.get("answer")
    return StageWait.model_validate(
        {
            **json.loads(str(held["data"])),
            "answer": json.loads(str(answer)) if answer is not None else None,
            "sent": bool(held.get("sent", False)),
        }
    )


class DynamoStageWaits(RegistryTable):
    """One item per agent (``STAGEWAIT#<agent>`` / ``wait``): the wait's facts as JSON, its
    ``answer`` and ``sent`` beside them, each write conditional on the entry it is about."""

    def hold_stage_wait(self, wait: StageWait, *, replacing: str | None = None) -> StageWait:
        data = wait.model_dump(mode="json", exclude={"answer", "sent"})
        item = {
            "PK": f"STAGEWAIT#{wait.agent_id}",
            "SK": "wait",
            "entity": "stage_wait",
            "entry": wait.entry,
            "data": json.dumps(data, separators=(",", ":")),
            "sent": False,
            TTL_ATTRIBUTE: int((wait.created_at + WAIT_RETENTION).timestamp()),
        }
        condition = "attribute_not_exists(PK) OR #sent = :true"
        values: dict[str, Any] = {":true": True}
        if replacing is not None:
            condition += " OR #entry = :replacing"
            values[":replacing"] = replacing
        try:
            self._call(
                "put_item",
                TableName=self.table_name,
                Item=dump_item(item),
                ConditionExpression=condition,
                ExpressionAttributeNames={"#sent": "sent", "#entry": "entry"}
                if replacing
                else {"#sent": "sent"},
                ExpressionAttributeValues=dump_item(values),
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            held: Any = exc.response.get("Item")
            if held:
                return _load(held)
            found = self.stage_wait(wait.agent_id)
            if found is None:  # pragma: no cover - gone between the two requests
                raise
            return found
        return wait

    def stage_wait(self, agent_id: str) -> StageWait | None:
        got = self._call("get_item", TableName=self.table_name, Key=_key(agent_id), ConsistentRead=True)
        item = got.get("Item")
        return _load(item) if item else None

    def answer_stage_wait(self, agent_id: str, entry: str, answer: dict[str, Any]) -> StageWait | None:
        try:
            got = self._call(
                "update_item",
                TableName=self.table_name,
                Key=_key(agent_id),
                UpdateExpression="SET #answer = :answer",
                ConditionExpression="#entry = :entry AND attribute_not_exists(#answer)",
                ExpressionAttributeNames={"#answer": "answer", "#entry": "entry"},
                ExpressionAttributeValues=dump_item(
                    {":answer": json.dumps(answer, separators=(",", ":")), ":entry": entry}
                ),
                ReturnValues="ALL_NEW",
            )
        except ClientError:
            held = self.stage_wait(agent_id)
            return held if held is not None and held.entry == entry else None
        return _load(got["Attributes"])

    def mark_stage_wait_sent(self, agent_id: str, entry: str) -> None:
        try:
            self._call(
                "update_item",
                TableName=self.table_name,
                Key=_key(agent_id),
                UpdateExpression="SET #sent = :true",
                ConditionExpression="#entry = :entry",
                ExpressionAttributeNames={"#sent": "sent", "#entry": "entry"},
                ExpressionAttributeValues=dump_item({":true": True, ":entry": entry}),
            )
        except ClientError:
            return  # another stage's wait now: this one's answer is settled
