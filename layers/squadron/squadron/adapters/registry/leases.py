"""Each agent's lease: one live task per agent (the :class:`~squadron.registry_ports.Leases` port)."""

from __future__ import annotations

from datetime import datetime, timedelta

from botocore.exceptions import ClientError

from squadron.adapters.registry.keys import agent_from, agent_key, dump_item, epoch_us, iso, load_item
from squadron.adapters.registry.table import RegistryTable
from squadron.domain.agents import AgentRecord, ConflictError


class DynamoLeases(RegistryTable):
    """The lease fields of an agent's item, conditional on the current holder."""

    # --- leases (one live task per agent) ----------------------------------------------------

    def acquire_lease(self, agent_id: str, owner: str, now: datetime, ttl: timedelta) -> AgentRecord:
        """Hold the agent's lease until ``now + ttl``; renews it for its holder.

        Raises ConflictError while another owner holds an unexpired lease (or the agent
        does not exist).
        """
        expires = now + ttl
        try:
            response = self._call(
                "update_item",
                TableName=self.table_name,
                Key=dump_item(agent_key(agent_id)),
                UpdateExpression=(
                    "SET lease_owner = :owner, lease_expires_at = :exp, lease_expires_epoch = :exp_epoch, "
                    "heartbeat_at = :now, version = version + :one, updated_at = :now"
                ),
                ConditionExpression=(
                    "attribute_exists(PK) AND (lease_owner = :owner OR attribute_not_exists(lease_owner) "
                    "OR lease_owner = :none OR lease_expires_epoch < :now_epoch)"
                ),
                ExpressionAttributeValues=dump_item(
                    {
                        ":owner": owner,
                        ":exp": iso(expires),
                        ":exp_epoch": epoch_us(expires),
                        ":now": iso(now),
                        ":now_epoch": epoch_us(now),
                        ":one": 1,
                        ":none": None,
                    }
                ),
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            raise ConflictError(f"lease of {agent_id}", "held by another live task") from exc
        return agent_from(load_item(response["Attributes"]))

    def release_lease(self, agent_id: str, owner: str, now: datetime) -> None:
        """Give the lease up; a no-op unless ``owner`` holds it."""
        try:
            self._call(
                "update_item",
                TableName=self.table_name,
                Key=dump_item(agent_key(agent_id)),
                UpdateExpression=(
                    "SET lease_owner = :none, lease_expires_at = :none, lease_expires_epoch = :none, "
                    "version = version + :one, updated_at = :now"
                ),
                ConditionExpression="lease_owner = :owner",
                ExpressionAttributeValues=dump_item(
                    {":owner": owner, ":none": None, ":one": 1, ":now": iso(now)}
                ),
            )
        except ClientError:
            return
