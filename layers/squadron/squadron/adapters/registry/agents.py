"""The agents' records, one item each (the :class:`~squadron.registry_ports.AgentRecords` port)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from squadron.adapters.registry.keys import agent_from, agent_key, dump_item, iso, load_item
from squadron.adapters.registry.table import RegistryTable
from squadron.domain.agents import AgentRecord, ConflictError, RegistryError, candidate_uid
from squadron.domain.effects import AgentWrite


class DynamoAgentRecords(RegistryTable):
    """Agents by id, written on their version; each agent's POSIX uid."""

    def get_agent(self, agent_id: str) -> AgentRecord | None:
        def read() -> list[dict[str, Any]]:
            response = self._call(
                "get_item", TableName=self.table_name, Key=dump_item(agent_key(agent_id)), ConsistentRead=True
            )
            return [load_item(response["Item"])] if "Item" in response else []

        found = self._unheld(read(), read)
        return agent_from(found[0]) if found else None

    def pm_agent(self, repo_id: int) -> AgentRecord | None:
        return self.get_agent(f"{repo_id}-pm")

    def put_agent(self, write: AgentWrite) -> None:
        self._write_agent(write)

    #: Candidates an agent tries before giving up on a uid of its own (each a 2^-30 collision).
    UID_ATTEMPTS = 16

    def claim_uid(self, agent_id: str, at: datetime) -> int:
        """The agent's POSIX uid, claimed on first use: no other agent ever holds the same one.

        A claim is a ``UID#<n>`` item owned by the agent (put only if absent or already its own),
        then the agent's ``uid`` (set only if unset, so two concurrent claims agree on one).
        """
        agent = self.get_agent(agent_id)
        if agent is None:
            raise ConflictError(f"agent {agent_id}", "does not exist")
        if agent.uid is not None:
            return agent.uid
        for attempt in range(self.UID_ATTEMPTS):
            uid = candidate_uid(agent_id, attempt)
            try:
                self._call(
                    "put_item",
                    TableName=self.table_name,
                    Item=dump_item({"PK": f"UID#{uid}", "SK": "UID", "entity": "uid", "owner": agent_id}),
                    ConditionExpression="attribute_not_exists(PK) OR #owner = :agent",
                    ExpressionAttributeNames={"#owner": "owner"},
                    ExpressionAttributeValues=dump_item({":agent": agent_id}),
                )
            except ClientError:
                continue  # another agent's uid: try the next candidate
            try:
                self._call(
                    "update_item",
                    TableName=self.table_name,
                    Key=dump_item(agent_key(agent_id)),
                    UpdateExpression="SET #uid = :uid, version = version + :one, updated_at = :at",
                    ConditionExpression="attribute_exists(PK) AND (attribute_not_exists(#uid) OR #uid = :none)",
                    ExpressionAttributeNames={"#uid": "uid"},
                    ExpressionAttributeValues=dump_item(
                        {":uid": uid, ":one": 1, ":at": iso(at), ":none": None}
                    ),
                )
            except ClientError:
                current = self.get_agent(agent_id)  # a concurrent claim set it first: that one holds
                if current is None or current.uid is None:
                    raise
                return current.uid
            return uid
        raise RegistryError(f"no free uid for {agent_id} after {self.UID_ATTEMPTS} candidates")
