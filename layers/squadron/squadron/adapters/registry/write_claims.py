"""An agent task's GitHub writes, each once (the :class:`~squadron.registry_ports.WriteClaims` port)."""

from __future__ import annotations

import json
import zlib
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from squadron.adapters.registry.keys import TTL_ATTRIBUTE, dump_item, iso, load_item
from squadron.adapters.registry.table import RegistryTable
from squadron.domain.writes import MAX_WRITE_RESULT_BYTES, WRITE_RETENTION, WriteClaim


class DynamoWriteClaims(RegistryTable):
    """One conditional PutItem per write key, its GitHub answer kept beside it."""

    # --- an agent task's GitHub writes, each once (the agent gateway) -----------------------

    def claim_write(self, agent_id: str, key: str, now: datetime) -> WriteClaim | None:
        """Claim the write ``key`` of ``agent_id``'s task: None the first time (carry it out),
        else what the earlier claim left (its GitHub answer once recorded, None until then).

        One conditional PutItem (``WRITE#<agent>`` / key, kept a day): a re-sent request (the
        task's transport retried an invocation whose answer it never got) finds the claim.
        """
        item = {
            "PK": f"WRITE#{agent_id}",
            "SK": key,
            "entity": "write",
            "claimed_at": iso(now),
            TTL_ATTRIBUTE: int((now + WRITE_RETENTION).timestamp()),
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
            held = load_item(exc.response.get("Item") or {})  # type: ignore[arg-type]
            answer = held.get("result")
            return WriteClaim(
                claimed_at=datetime.fromisoformat(
                    str(held.get("claimed_at") or iso(now)).replace("Z", "+00:00")
                ),
                result=json.loads(zlib.decompress(bytes(answer))) if answer is not None else None,
            )
        return None

    def record_write(self, agent_id: str, key: str, result: Any) -> None:
        """Keep GitHub's answer to the claimed write ``key`` (a re-sent request gets it back)."""
        packed = zlib.compress(json.dumps(result, separators=(",", ":")).encode())
        if len(packed) > MAX_WRITE_RESULT_BYTES:
            return  # a re-sent request finds the write on GitHub by its marker instead
        self._call(
            "update_item",
            TableName=self.table_name,
            Key=dump_item({"PK": f"WRITE#{agent_id}", "SK": key}),
            UpdateExpression="SET #result = :result",
            ExpressionAttributeNames={"#result": "result"},
            ExpressionAttributeValues=dump_item({":result": packed}),
        )
