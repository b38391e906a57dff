"""A repository's dashboard shows the change sets read from DynamoDB (moto): the dashboards
service, wired as the Lambda wires it (``change_sets=registry.change_sets``), renders each set
that includes the repository and none that does not."""

from __future__ import annotations

from datetime import timedelta

import boto3
import pytest
from moto import mock_aws

from squadron.adapters.dynamo_registry import TABLE_DEFINITION, DynamoRegistry
from squadron.domain.dashboard_refresh import RefreshRequest
from squadron.domain.domain_events import Repository
from squadron.shell.dashboards import DashboardService
from tests.support.fake_dashboards import DashboardGitHub, FakeDashboardSlots, SimulatedQueue
from tests.unit.test_change_sets import T0, proposed, ready

TABLE = "registry"


@pytest.mark.parametrize(
    ("repository", "repo_id", "shown"),
    [("octo/client", 13, True), ("octo/schema", 11, True), ("octo/docs", 14, False)],
    ids=["a member", "the origin", "not in the set"],
)
def test_the_dashboard_shows_the_sets_stored_for_its_repository(
    repository: str, repo_id: int, shown: bool
) -> None:
    with mock_aws():
        boto3.client("dynamodb").create_table(TableName=TABLE, **TABLE_DEFINITION)
        registry = DynamoRegistry(TABLE)
        working = ready()
        # A set of two other repositories (its own id), shown on neither dashboard above.
        waiting = proposed(("octo/server", "octo/app"), (), origin="octo/server").model_copy(
            update={"id": "cs-00000000000a"}
        )
        registry.create_change_set(working, [])
        registry.create_change_set(waiting, [])
        github = DashboardGitHub(repo=repository)
        now = T0 + timedelta(hours=1)
        service = DashboardService(
            registry=registry,
            slots=FakeDashboardSlots(),
            queue=SimulatedQueue(clock=lambda: now),
            reader=github.reader,
            bot_login="squadron[bot]",
            clock=lambda: now,
            change_sets=registry.change_sets,
        )
        request = RefreshRequest(
            repository=Repository(id=repo_id, full_name=repository), installation=77, cause="sweep"
        )
        report = service.refresh([request])
    assert report.rendered == [repository] and not report.failed
    body = github.writes[-1][1]
    assert (f"`{working.id}` | ready" in body) is shown
    assert ("### Change sets" in body) is shown
    assert waiting.id not in body  # a set of other repositories only
