"""A repository's memory on the registry's table: the :class:`~squadron.ports.MemoryStore` port.

=====================================  =========================================  ==============
What                                   Item                                       Read with
=====================================  =========================================  ==============
a repository's facts                   ``MEMORY#<r>`` / ``FACT#<fact id>``        Query on PK
its retrospectives, oldest first       ``RETRO#<r>`` / ``<period end>#<issue>``   Query on PK
its artifacts (an agent's plan...)     ``ARTIFACT#<r>`` / ``<issue or -> #<name>`` Query on PK
=====================================  =========================================  ==============

Why here: memory is small (at most ``memory.max_facts`` facts of at most 500 characters per
repository: one Query reads all of it), it is reached only through the agent gateway (which
takes the repository from the verified agent's record, never from the task) and the operator
CLI, and the table already has what it needs — conditional writes on a fact's ``version`` and
TTL (``expires_at``), which deletes a fact left unused past its expiry (pinned facts have no
TTL). Its items carry no ``entity`` of an event, so the stream's filter never publishes them.
"""

from __future__ import annotations

from datetime import datetime

from botocore.exceptions import ClientError

from squadron.adapters.dynamo_registry import TTL_ATTRIBUTE, DynamoTable, dump_item
from squadron.domain.agents import ConflictError
from squadron.domain.artifacts import Artifact
from squadron.domain.memory import MemoryFact
from squadron.domain.retrospective import RetroRecord

ENTITY = "memory"
RETRO_ENTITY = "retrospective"
ARTIFACT_ENTITY = "artifact"


def memory_pk(repo_id: int) -> str:
    return f"MEMORY#{repo_id}"


def _key(repo_id: int, fact_id: str) -> dict[str, object]:
    return dump_item({"PK": memory_pk(repo_id), "SK": f"FACT#{fact_id}"})


class DynamoMemory(DynamoTable):
    """Facts per repository, each written on the condition of the version it was read at."""

    def _put_versioned(self, item: dict[str, object], expected_version: int | None, what: str) -> None:
        """Put ``item``: new (``expected_version`` None) or over the version it was read at."""
        request: dict[str, object] = {"TableName": self.table_name, "Item": dump_item(item)}
        if expected_version is None:
            request["ConditionExpression"] = "attribute_not_exists(PK)"
        else:
            request["ConditionExpression"] = "version = :v"
            request["ExpressionAttributeValues"] = dump_item({":v": expected_version})
        try:
            self._call("put_item", **request)
        except ClientError as exc:
            raise ConflictError(f"{what} changed meanwhile") from exc

    def facts(self, repo_id: int) -> list[MemoryFact]:
        # Eventually consistent (half the read units): a fact written a moment ago may be missed
        # once; every write is conditional on the version read, so none is lost or overwritten.
        items = self._query(
            KeyConditionExpression="PK = :pk",
            ExpressionAttributeValues={":pk": {"S": memory_pk(repo_id)}},
        )
        return [
            MemoryFact.model_validate_json(item["data"]) for item in items if item.get("entity") == ENTITY
        ]

    def put_fact(self, fact: MemoryFact, expected_version: int | None, expires_at: datetime | None) -> None:
        item: dict[str, object] = {
            "PK": memory_pk(fact.repo_id),
            "SK": f"FACT#{fact.fact_id}",
            "entity": ENTITY,
            "data": fact.model_dump_json(),
            "version": fact.version,
            "status": fact.status,
        }
        if expires_at is not None:
            item[TTL_ATTRIBUTE] = int(expires_at.timestamp())
        self._put_versioned(item, expected_version, f"fact {fact.fact_id}")

    def delete_fact(self, repo_id: int, fact_id: str) -> bool:
        answer = self._call(
            "delete_item", TableName=self.table_name, Key=_key(repo_id, fact_id), ReturnValues="ALL_OLD"
        )
        return bool(answer.get("Attributes"))

    # --- retrospectives ---------------------------------------------------------------------

    def retrospectives(self, repo_id: int) -> list[RetroRecord]:
        """The repository's retrospectives, oldest first (by the end of their period)."""
        items = self._partition(f"RETRO#{repo_id}")
        return [RetroRecord.model_validate_json(i["data"]) for i in items if i.get("entity") == RETRO_ENTITY]

    def put_retrospective(self, record: RetroRecord, expected_version: int | None) -> None:
        item = {
            "PK": f"RETRO#{record.repo_id}",
            "SK": f"{record.window_end.isoformat()}#{record.issue_number}",
            "entity": RETRO_ENTITY,
            "issue_number": record.issue_number,
            "data": record.model_dump_json(),
            "version": record.version,
        }
        self._put_versioned(item, expected_version, f"retrospective #{record.issue_number}")

    # --- artifacts --------------------------------------------------------------------------

    def artifacts(self, repo_id: int) -> list[Artifact]:
        items = self._query(
            KeyConditionExpression="PK = :pk",
            ExpressionAttributeValues={":pk": {"S": f"ARTIFACT#{repo_id}"}},
        )
        return [Artifact.model_validate_json(i["data"]) for i in items if i.get("entity") == ARTIFACT_ENTITY]

    def put_artifact(self, artifact: Artifact, expected_version: int | None) -> None:
        where = "-" if artifact.issue_number is None else str(artifact.issue_number)
        item = {
            "PK": f"ARTIFACT#{artifact.repo_id}",
            "SK": f"{where}#{artifact.name}",
            "entity": ARTIFACT_ENTITY,
            "data": artifact.model_dump_json(),
            "version": artifact.version,
        }
        self._put_versioned(item, expected_version, f"artifact {artifact.label}")
