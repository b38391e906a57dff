"""The dashboards Lambda as the stack wires it (``build_dashboards`` from its environment) reads
the deployment's pipeline runs from Step Functions (moto's interpreter, runs that really run):
the dashboard issue shows each running run's current stage, what it waits for and its console
link, and never a run of another deployment of the same account (a stage whose name begins like
ours)."""

from __future__ import annotations

import boto3
import pytest

from squadron.adapters.dynamo_registry import TABLE_DEFINITION
from squadron.adapters.step_functions import Pipelines
from squadron.domain.dashboard_refresh import RefreshRequest
from squadron.domain.domain_events import Repository
from squadron.domain.pipeline_runs import console_url
from squadron.domain.pipeline_wire import execution_name, run_input
from squadron.shell.wiring import build_dashboards
from tests.adapters.test_pipeline_runs_cli import human
from tests.adapters.test_router_wiring import DASHBOARD_ENVIRONMENT
from tests.support.fake_dashboards import DashboardGitHub
from tests.support.step_functions import PREFIX, REGION, ROLE, step_functions

TABLE = "squadron-registry"


def test_the_wired_dashboards_show_each_running_runs_stage_and_console_link(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with step_functions() as stack:
        boto3.client("dynamodb", region_name=REGION).create_table(TableName=TABLE, **TABLE_DEFINITION)
        ours = stack.pipelines.ensure(42, "review", human(stack.queue_url, "review"))
        mine = stack.pipelines.start(ours.version_arn, execution_name("a"), run_input(42, 7)).execution_arn
        # The same account's stage "sq-1" (its prefix begins like ours): its run of repository 42
        # must not reach our dashboard, nor be read as our repository 1's pipeline "42-review".
        theirs = Pipelines(prefix=f"{PREFIX}-1", role_arn=ROLE, client=stack.sfn).ensure(
            42, "review", human(stack.queue_url, "review")
        )
        other = stack.pipelines.start(theirs.version_arn, execution_name("b"), run_input(42, 8)).execution_arn
        stack.messages(2)  # both stages wait: their TaskScheduled is in the histories

        service = build_dashboards(
            {**DASHBOARD_ENVIRONMENT, "PIPELINES_PREFIX": PREFIX, "PIPELINES_ROLE_ARN": ROLE}
        )
        assert service.pipelines is not None
        github = DashboardGitHub()
        service.reader = github.reader
        for repository in (42, 1):
            github.repo = f"octo/r{repository}"
            github.opened.clear()
            report = service.refresh(
                [
                    RefreshRequest(
                        repository=Repository(id=repository, full_name=github.repo),
                        installation=77,
                        cause="sweep",
                    )
                ]
            )
            assert report.failed == {}, report.failed
            shown = github.body.split("## Pipelines", 1)[1] if "## Pipelines" in github.body else ""
            if repository == 42:
                assert f"[review]({console_url(mine)})" in shown
                assert "| Approve | 1 human approval from maintainers |" in shown
                assert "#7" in shown
            assert other.rsplit(":", 1)[1] not in github.body and console_url(other) not in github.body
            assert "#8" not in shown
        assert build_dashboards(DASHBOARD_ENVIRONMENT).pipelines is None  # a stack without pipelines
