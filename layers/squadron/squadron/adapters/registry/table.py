"""One DynamoDB table's plumbing (errors named, queries paged) and the registry's base: what its
ports' adapters share (the requests an agent write, a blocker, a link or an event stands for)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from squadron.adapters.errors import AdapterError
from squadron.adapters.registry.keys import (
    EVENT_ENTITY,
    HELD_BY,
    HELD_ENTITY,
    HISTORY_RETENTION,
    TTL_ATTRIBUTE,
    agent_item,
    dump_item,
    error_code,
    history_pk,
    history_time,
    issue_pk,
    load_item,
)
from squadron.adapters.staged_decisions import StagedDecisions
from squadron.domain.agents import AgentRecord, ConflictError, IssueState, RoleKind
from squadron.domain.domain_events import DomainEvent
from squadron.domain.effects import AgentWrite
from squadron.domain.history import utc_instant

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


class RegistryUnavailableError(AdapterError):
    """DynamoDB failed for a reason other than a lost condition."""


class DynamoTable:
    """One DynamoDB table and the plumbing its adapters share (errors named, queries paged)."""

    def __init__(self, table_name: str, *, client: DynamoDBClient | None = None) -> None:
        self.table_name = table_name
        self._client = client

    @property
    def client(self) -> DynamoDBClient:
        if self._client is None:
            self._client = boto3.client("dynamodb")
        return self._client

    # --- plumbing ---------------------------------------------------------------------------

    def _call(self, operation: str, **kwargs: Any) -> Any:
        try:
            return getattr(self.client, operation)(**kwargs)
        except ClientError as exc:
            if error_code(exc) in ("ConditionalCheckFailedException", "TransactionCanceledException"):
                raise
            error = exc.response.get("Error", {})
            raise RegistryUnavailableError(
                f"DynamoDB {operation} on {self.table_name} failed: {error.get('Message', exc)}",
                code=error.get("Code"),
            ) from exc
        except BotoCoreError as exc:
            raise RegistryUnavailableError(
                f"DynamoDB {operation} on {self.table_name} failed: {exc}"
            ) from exc

    def _query(self, **kwargs: Any) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        request = {"TableName": self.table_name, **kwargs}
        while True:
            page = self._call("query", **request)
            items += [load_item(item) for item in page.get("Items", [])]
            if "LastEvaluatedKey" not in page:
                return items
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _partition(self, pk: str) -> list[dict[str, Any]]:
        return self._query(
            KeyConditionExpression="PK = :pk",
            ExpressionAttributeValues={":pk": {"S": pk}},
            ConsistentRead=True,
        )


class RegistryTable(DynamoTable, StagedDecisions):
    """The registry's table and the requests more than one port writes (an agent and its branch
    link, blocker edges, pull-request links, events): each port's adapter is one of these."""

    def __init__(
        self,
        table_name: str,
        *,
        client: DynamoDBClient | None = None,
        history_retention: timedelta = HISTORY_RETENTION,
    ) -> None:
        if history_retention <= timedelta(0):
            raise ValueError(f"history retention must be positive, got {history_retention}")
        super().__init__(table_name, client=client)
        self.history_retention = history_retention

    def _agent_put(self, write: AgentWrite) -> dict[str, Any]:
        """The Put of an agent write, conditional on its expected version."""
        put: dict[str, Any] = {"TableName": self.table_name, "Item": dump_item(agent_item(write.record))}
        if write.expected_version is None:
            put["ConditionExpression"] = "attribute_not_exists(PK)"
        else:
            # Not while a staged decision holds the agent (it read this version and will write it).
            put["ConditionExpression"] = "version = :expected AND attribute_not_exists(held_by)"
            put["ExpressionAttributeValues"] = {":expected": {"N": str(write.expected_version)}}
        return put

    def _branch_put(self, record: AgentRecord) -> dict[str, Any] | None:
        if not (record.branch and record.issue_number is not None and record.kind is RoleKind.DEV):
            return None
        item = {
            "PK": f"BRANCH#{record.repo_id}#{record.branch}",
            "SK": "BRANCH",
            "entity": "branch",
            "issue_number": record.issue_number,
        }
        return {"TableName": self.table_name, "Item": dump_item(item)}

    def _transact(self, parts: Sequence[tuple[str, dict[str, Any], str]]) -> None:
        """Write ``parts`` ((kind, request, what) triples) all or nothing; name the lost condition."""
        try:
            self._call("transact_write_items", TransactItems=[{kind: request} for kind, request, _ in parts])
        except ClientError as exc:
            reasons = exc.response.get("CancellationReasons", [])
            lost = [
                parts[i][2]
                for i, reason in enumerate(reasons)
                if reason.get("Code") == "ConditionalCheckFailed"
            ]
            what, _, detail = (lost[0] if lost else "a transaction: its condition failed").partition(": ")
            raise ConflictError(what, detail) from exc

    def _write_agent(self, write: AgentWrite, *extra: tuple[str, dict[str, Any], str]) -> None:
        expected = write.expected_version
        detail = "already exists" if expected is None else f"expected version {expected}"
        what = f"agent {write.record.agent_id}"
        branch = self._branch_put(write.record)
        parts = [("Put", self._agent_put(write), f"{what}: {detail}"), *extra]
        if branch is not None:
            parts.append(("Put", branch, f"branch {write.record.branch}: not written"))
        if len(parts) > 1:
            self._transact(parts)
            return
        try:
            self._call("put_item", **self._agent_put(write))
        except ClientError as exc:
            raise ConflictError(what, detail) from exc

    def _unheld(
        self, items: list[dict[str, Any]], read_again: Callable[[], list[dict[str, Any]]]
    ) -> list[dict[str, Any]]:
        """``items`` as they are once the staged decisions holding any of them are carried to their
        end (:mod:`squadron.adapters.staged_decisions`): a reader never sees half of one. An agent
        held again meanwhile is as stored; a placeholder (an agent not created yet) is left out."""
        held = sorted({str(item[HELD_BY]) for item in items if item.get(HELD_BY)})
        for key in held:
            self.drive(key)
        found = read_again() if held else items
        return [item for item in found if item.get("entity") != HELD_ENTITY]

    def _edge(
        self, repo_id: int, issue: int, blocker: int, *, resolved: bool
    ) -> list[tuple[str, dict[str, Any], str]]:
        forward = {
            "PK": issue_pk(repo_id, issue),
            "SK": f"BLOCKED_BY#{blocker}",
            "entity": "edge",
            "resolved": resolved,
        }
        reverse = {
            "PK": issue_pk(repo_id, blocker),
            "SK": f"BLOCKS#{issue}",
            "entity": "edge",
            "resolved": resolved,
        }
        return [
            (
                "Put",
                {"TableName": self.table_name, "Item": dump_item(forward)},
                f"edge #{issue} -> #{blocker}",
            ),
            (
                "Put",
                {"TableName": self.table_name, "Item": dump_item(reverse)},
                f"edge #{blocker} <- #{issue}",
            ),
        ]

    def _add_blocker_parts(
        self, repo_id: int, issue: int, blocker: int
    ) -> list[tuple[str, dict[str, Any], str]]:
        open_blocker = (
            "ConditionCheck",
            {
                "TableName": self.table_name,
                "Key": dump_item({"PK": issue_pk(repo_id, blocker), "SK": "STATE"}),
                "ConditionExpression": "attribute_not_exists(#state) OR #state <> :closed",
                "ExpressionAttributeNames": {"#state": "state"},
                "ExpressionAttributeValues": {":closed": {"S": str(IssueState.CLOSED)}},
            },
            f"blocker #{blocker}: it is closed",
        )
        return [open_blocker, *self._edge(repo_id, issue, blocker, resolved=False)]

    def _remove_blocker_parts(
        self, repo_id: int, issue: int, blocker: int
    ) -> list[tuple[str, dict[str, Any], str]]:
        exists = self._partition_has(repo_id, issue, f"BLOCKED_BY#{blocker}")
        return (
            [
                (
                    "Update",
                    {
                        "TableName": self.table_name,
                        "Key": dump_item({"PK": pk, "SK": sk}),
                        "UpdateExpression": "SET resolved = :t",
                        "ExpressionAttributeValues": {":t": {"BOOL": True}},
                    },
                    f"edge {pk}/{sk}",
                )
                for pk, sk in (
                    (issue_pk(repo_id, issue), f"BLOCKED_BY#{blocker}"),
                    (issue_pk(repo_id, blocker), f"BLOCKS#{issue}"),
                )
            ]
            if exists
            else []
        )

    def _partition_has(self, repo_id: int, number: int, sk: str) -> bool:
        response = self._call(
            "get_item",
            TableName=self.table_name,
            Key=dump_item({"PK": issue_pk(repo_id, number), "SK": sk}),
            ProjectionExpression="PK",
            ConsistentRead=True,
        )
        return "Item" in response

    def _link_parts(
        self, repo_id: int, pr_number: int, issue_number: int
    ) -> list[tuple[str, dict[str, Any], str]]:
        link = {
            "PK": issue_pk(repo_id, pr_number),
            "SK": "PRLINK",
            "entity": "prlink",
            "issue_number": issue_number,
        }
        back = {
            "PK": issue_pk(repo_id, issue_number),
            "SK": f"PR#{pr_number}",
            "entity": "prlink",
            "pr_number": pr_number,
        }
        return [
            ("Put", {"TableName": self.table_name, "Item": dump_item(link)}, f"PR #{pr_number} link"),
            ("Put", {"TableName": self.table_name, "Item": dump_item(back)}, f"#{issue_number} PR list"),
        ]

    def _event_put(self, event: DomainEvent) -> dict[str, Any]:
        item = {
            "PK": f"EVENT#{event.id}",
            "SK": "EVENT",
            "entity": EVENT_ENTITY,
            "event_id": event.id,
            "detail_type": event.detail_type,
            "detail": event.stored(),
            "repo_full_name": event.repository.full_name,
            # The repository's history (:meth:`history`), by time.
            "GSI1PK": history_pk(event.repository.id),
            "GSI1SK": f"{history_time(event.time)}#{event.id}",
            TTL_ATTRIBUTE: int((utc_instant(event.time) + self.history_retention).timestamp()),
        }
        # Conditional: an event id is stored (and so published) once, whatever retries it.
        return {
            "TableName": self.table_name,
            "Item": dump_item(item),
            "ConditionExpression": "attribute_not_exists(PK)",
        }
