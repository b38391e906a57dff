"""Reviews of pull requests and the merge gate's verdicts (the
:class:`~squadron.registry_ports.GateRecords` port)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from squadron.adapters.registry.keys import BATCH_GET_KEYS, dump_item, iso, issue_pk, load_item
from squadron.adapters.registry.table import RegistryTable
from squadron.domain.agents import ConflictError
from squadron.domain.dashboard import GateView
from squadron.domain.domain_events import DomainEvent
from squadron.domain.effects import RecordReview


class DynamoGateRecords(RegistryTable):
    """The latest review per reviewer; the gate's verdict (with its event) and what it said."""

    def reviews_of(self, repo_id: int, pr_number: int) -> dict[str, RecordReview]:
        """The latest review of each reviewer of a pull request."""
        items = self._query(
            KeyConditionExpression="PK = :pk AND begins_with(SK, :r)",
            ExpressionAttributeValues={":pk": {"S": issue_pk(repo_id, pr_number)}, ":r": {"S": "REVIEW#"}},
            ConsistentRead=True,
        )
        return {
            item["reviewer"]: RecordReview(
                repo_id,
                pr_number,
                item["reviewer"],
                item["state"],
                item.get("commit_id"),
                int(item["review_id"]),
            )
            for item in items
        }

    def record_review(self, review: RecordReview, at: datetime) -> None:
        item = {
            "PK": issue_pk(review.repo_id, review.pr_number),
            "SK": f"REVIEW#{review.reviewer}",
            "entity": "review",
            "reviewer": review.reviewer,
            "state": review.state,
            "commit_id": review.commit_id,
            "review_id": review.review_id,
            "recorded_at": at.isoformat(),
        }
        try:
            self._call(
                "put_item",
                TableName=self.table_name,
                Item=dump_item(item),
                ConditionExpression="attribute_not_exists(PK) OR review_id <= :id",
                ExpressionAttributeValues={":id": {"N": str(review.review_id)}},
            )
        except ClientError:
            return  # a later review of this reviewer is stored

    def gate_verdict(self, repo_id: int, pr_number: int) -> str | None:
        return self.gate_state(repo_id, pr_number)[0]

    def gate_state(self, repo_id: int, pr_number: int) -> tuple[str | None, str]:
        response = self._call(
            "get_item",
            TableName=self.table_name,
            Key=dump_item({"PK": issue_pk(repo_id, pr_number), "SK": "GATE"}),
            ConsistentRead=True,
        )
        item = response.get("Item")
        if item is None:
            return None, ""
        loaded = load_item(item)
        return str(loaded.get("verdict") or "") or None, str(loaded.get("description") or "")

    def gate_views(self, repo_id: int, pr_numbers: Iterable[int]) -> dict[int, GateView]:
        """The merge gate's verdict and what it said on each PR judged (BatchGetItem, 100 a call)."""
        numbers = sorted(set(pr_numbers))
        found: dict[int, GateView] = {}
        for start in range(0, len(numbers), BATCH_GET_KEYS):
            keys: list[Any] = [
                dump_item({"PK": issue_pk(repo_id, n), "SK": "GATE"})
                for n in numbers[start : start + BATCH_GET_KEYS]
            ]
            while keys:
                answer = self._call(
                    "batch_get_item",
                    RequestItems={self.table_name: {"Keys": keys, "ConsistentRead": True}},
                )
                for item in answer.get("Responses", {}).get(self.table_name, []):
                    loaded = load_item(item)
                    verdict = str(loaded.get("verdict") or "")
                    if verdict:
                        number = int(str(loaded["PK"]).rsplit("#", 1)[1])
                        found[number] = GateView(verdict, str(loaded.get("description") or ""))
                keys = answer.get("UnprocessedKeys", {}).get(self.table_name, {}).get("Keys", [])
        return found

    def set_gate_description(self, repo_id: int, pr_number: int, verdict: str, description: str) -> bool:
        try:
            self._call(
                "update_item",
                TableName=self.table_name,
                Key=dump_item({"PK": issue_pk(repo_id, pr_number), "SK": "GATE"}),
                UpdateExpression="SET description = :d",
                ConditionExpression="verdict = :v",
                ExpressionAttributeValues=dump_item({":d": description[:140], ":v": verdict}),
            )
        except ClientError:
            return False
        return True

    def change_verdict(self, repo_id: int, pr_number: int, previous: str | None, event: DomainEvent) -> bool:
        """The verdict and its event in one transaction, if the verdict is still ``previous``."""
        verdict = str(event.data["verdict"])
        condition = "attribute_not_exists(verdict)" if previous is None else "verdict = :previous"
        values: dict[str, Any] = {
            ":v": verdict,
            ":at": iso(event.time),
            ":e": "gate",
            ":d": str(event.data.get("description") or "")[:140],
        }
        if previous is not None:
            values[":previous"] = previous
        update = {
            "TableName": self.table_name,
            "Key": dump_item({"PK": issue_pk(repo_id, pr_number), "SK": "GATE"}),
            "UpdateExpression": "SET verdict = :v, judged_at = :at, entity = :e, description = :d",
            "ConditionExpression": condition,
            "ExpressionAttributeValues": dump_item(values),
        }
        try:
            self._transact(
                [
                    ("Update", update, f"PR #{pr_number} verdict: no longer {previous}"),
                    ("Put", self._event_put(event), f"event {event.id}: exists"),
                ]
            )
        except ConflictError:
            return False
        return True
