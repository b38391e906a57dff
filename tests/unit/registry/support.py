"""What the registry's contract suites share: the implementations every port's suite runs
against (the in-memory fake the routing tests use, and the DynamoDB adapter under moto), and the
records they start from. One suite per port of :mod:`squadron.registry_ports`, one module each."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import boto3
from moto import mock_aws

from squadron.adapters.dynamo_registry import TABLE_DEFINITION, DynamoRegistry
from squadron.domain.agents import AgentRecord, RoleKind
from squadron.domain.effects import AgentWrite
from squadron.registry_ports import AgentRecords
from tests.support.fake_registry import FakeRegistry

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from squadron.registry_ports import (
        AgentListings,
        Decisions,
        GateRecords,
        History,
        HumanWaits,
        Inboxes,
        IssueGraph,
        Launches,
        Leases,
        Outbox,
        PipelineRunIndex,
        WriteClaims,
    )

    def _every_port(
        registry: FakeRegistry | DynamoRegistry,
    ) -> tuple[
        AgentRecords,
        AgentListings,
        IssueGraph,
        Inboxes,
        Launches,
        Leases,
        WriteClaims,
        GateRecords,
        Decisions,
        Outbox,
        History,
        HumanWaits,
        PipelineRunIndex,
    ]:
        """Both implementations claim every port (mypy checks it here)."""
        return (registry,) * 13


T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
REPO = 1
#: The fake, the whole DynamoDB registry, and (for a port whose suite needs no other port) the
#: port's own adapter module's class alone on the table.
IMPLEMENTATIONS = ["fake", "dynamodb"]
ALONE = [*IMPLEMENTATIONS, "adapter alone"]


@contextmanager
def implementation(name: str, alone: Callable[[str, DynamoDBClient], Any] | None = None) -> Iterator[Any]:
    """The implementation ``name`` of :data:`ALONE`, on a fresh table."""
    if name == "fake":
        yield FakeRegistry()
        return
    with mock_aws():
        client = boto3.client("dynamodb")
        client.create_table(TableName="registry", **TABLE_DEFINITION)
        if name == "adapter alone":
            assert alone is not None
            yield alone("registry", client)
        else:
            yield DynamoRegistry("registry", client=client)


def agent(issue: int | None = 38, role: str = "feat-dev", **changes: Any) -> AgentRecord:
    kind = RoleKind.PM if issue is None else RoleKind.REVIEW if "review" in role else RoleKind.DEV
    agent_id = f"{REPO}-pm" if issue is None else f"{REPO}-{issue}-{role}"
    base = AgentRecord(
        agent_id=agent_id,
        role="pm" if issue is None else role,
        kind=kind,
        repo_id=REPO,
        repo_full_name="octo/app",
        installation_id=77,
        issue_number=issue,
        branch=f"feat/issue-{issue}" if kind is RoleKind.DEV else None,
        created_at=T0,
        updated_at=T0,
        generation_started_at=T0,
    )
    return base.model_copy(update=changes)


def created(registry: AgentRecords, record: AgentRecord) -> AgentRecord:
    registry.put_agent(AgentWrite(record, None))
    stored = registry.get_agent(record.agent_id)
    assert stored is not None
    return stored
