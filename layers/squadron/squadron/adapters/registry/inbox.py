"""Each agent's inbox (the :class:`~squadron.registry_ports.Inboxes` port)."""

from __future__ import annotations

from botocore.exceptions import ClientError

from squadron.adapters.registry.keys import dump_item, inbox_item, inbox_sk
from squadron.adapters.registry.table import RegistryTable
from squadron.domain.agents import InboxItem


class DynamoInboxes(RegistryTable):
    """Inbox items, each stored once, read oldest first."""

    def pending_inbox(self, agent_id: str) -> list[InboxItem]:
        """The agent's inbox, oldest first."""
        items = self._query(
            KeyConditionExpression="PK = :pk",
            ExpressionAttributeValues={":pk": {"S": f"INBOX#{agent_id}"}},
            ConsistentRead=True,
        )
        return [
            InboxItem.model_validate({k: v for k, v in item.items() if k not in ("PK", "SK", "entity")})
            for item in items
        ]

    def ack_inbox(self, agent_id: str, items: list[InboxItem]) -> None:
        """Remove items the agent has read (deleting an absent item is a no-op)."""
        for item in items:
            self._call(
                "delete_item",
                TableName=self.table_name,
                Key=dump_item({"PK": f"INBOX#{agent_id}", "SK": inbox_sk(item)}),
            )

    def deliver(self, item: InboxItem) -> None:
        try:
            self._call(
                "put_item",
                TableName=self.table_name,
                Item=inbox_item(item),
                ConditionExpression="attribute_not_exists(PK)",
            )
        except ClientError:
            return  # delivered before: stored once
