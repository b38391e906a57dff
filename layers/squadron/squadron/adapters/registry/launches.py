"""A pending launch confirmed, armed or held (the :class:`~squadron.registry_ports.Launches` port)."""

from __future__ import annotations

from datetime import datetime

from botocore.exceptions import ClientError

from squadron.adapters.registry.keys import agent_key, dump_item, iso
from squadron.adapters.registry.table import RegistryTable


class DynamoLaunches(RegistryTable):
    """Updates of an agent conditional on its pending launch token."""

    def confirm_launch(self, agent_id: str, token: str, task_arn: str, at: datetime) -> None:
        try:
            self._call(
                "update_item",
                TableName=self.table_name,
                Key=dump_item(agent_key(agent_id)),
                UpdateExpression=(
                    "SET pending_launch = :none, task_arn = :arn, version = version + :one, "
                    "updated_at = :at, GSI1SK = :gsi, launch_failures = :zero, launch_error = :none, "
                    "launch_failed_at = :none"
                ),
                ConditionExpression="pending_launch = :token",
                ExpressionAttributeValues=dump_item(
                    {
                        ":none": None,
                        ":zero": 0,
                        ":arn": task_arn,
                        ":one": 1,
                        ":at": iso(at),
                        ":gsi": f"{iso(at)}#{agent_id}",
                        ":token": token,
                    }
                ),
            )
        except ClientError:
            return  # that launch is no longer pending

    def hold_launch(self, agent_id: str, token: str, error: str, at: datetime) -> bool:
        """Record that RunTask failed for the pending launch ``token`` (it stays pending, to retry)."""
        try:
            self._call(
                "update_item",
                TableName=self.table_name,
                Key=dump_item(agent_key(agent_id)),
                UpdateExpression=(
                    "SET launch_failures = if_not_exists(launch_failures, :zero) + :one, launch_error = :error, "
                    "launch_failed_at = :at, version = version + :one, updated_at = :at, GSI1SK = :gsi"
                ),
                ConditionExpression="pending_launch = :token",
                ExpressionAttributeValues=dump_item(
                    {
                        ":zero": 0,
                        ":one": 1,
                        ":error": error[:500],
                        ":at": iso(at),
                        ":gsi": f"{iso(at)}#{agent_id}",
                        ":token": token,
                    }
                ),
            )
        except ClientError:
            return False
        return True

    def arm_launch(
        self,
        agent_id: str,
        token: str,
        secret_hash: str,
        expires_at: datetime,
        at: datetime,
        *,
        replacing: str | None = None,
    ) -> bool:
        """Store the secret hash of the pending launch ``token`` if it is not armed yet, or with
        ``replacing`` if it is still armed with that hash; False otherwise (the launch is no
        longer pending, or another executor armed it: :mod:`squadron.shell.launching`).

        Armed again (``replacing``), the new hash replaces the old: a task started by an earlier
        attempt would hold a secret that is no longer accepted, so the router re-arms only when
        no such task runs.
        """
        armed = (
            "launch_secret_hash = :old"
            if replacing is not None
            else "(attribute_not_exists(launch_secret_hash) OR launch_secret_hash = :none)"
        )
        values: dict[str, object] = {
            ":hash": secret_hash,
            ":exp": iso(expires_at),
            ":one": 1,
            ":at": iso(at),
            ":gsi": f"{iso(at)}#{agent_id}",
            ":token": token,
            **({":old": replacing} if replacing is not None else {":none": None}),
        }
        try:
            self._call(
                "update_item",
                TableName=self.table_name,
                Key=dump_item(agent_key(agent_id)),
                UpdateExpression=(
                    "SET launch_secret_hash = :hash, launch_secret_expires_at = :exp, "
                    "version = version + :one, updated_at = :at, GSI1SK = :gsi"
                ),
                ConditionExpression=f"pending_launch = :token AND {armed}",
                ExpressionAttributeValues=dump_item(values),
            )
        except ClientError:
            return False
        return True
