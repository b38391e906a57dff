"""`squadron pipelines list|show|cancel` and their adapter, on moto's Step Functions with runs
that really run (tests/support/step_functions.py): the current stage read from the history, the
runs of another deployment left alone, a cancel that stops the sub-pipeline runs too, and the
CLI against a local stack's moto server from a shell without AWS credentials."""

from __future__ import annotations

import io
import json
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.server import ThreadedMotoServer

from squadron.adapters import moto_step_functions
from squadron.adapters.dynamo_registry import TABLE_DEFINITION, DynamoRegistry
from squadron.adapters.operations import Operations, OperatorError, Target, stack_target
from squadron.adapters.pipeline_runs import PipelineRuns, RunRefusedError
from squadron.adapters.step_functions import Pipelines
from squadron.cli import main
from squadron.cli_types import EXIT_PROBLEMS
from squadron.domain.agents import AgentRecord, AgentStatus, RoleKind
from squadron.domain.effects import AgentWrite
from squadron.domain.pipeline_runs import RunSummary, console_url, run_id
from squadron.domain.pipeline_wire import (
    SEND_AND_WAIT,
    START_CHILD,
    child_parameters,
    execution_name,
    run_input,
    task_parameters,
)
from tests.support.step_functions import PREFIX, ROLE, Stack, step_functions, wait_for

DIGEST = "ab" * 32


def human(queue_url: str, pipeline: str, prefix_repo: int = 42) -> dict[str, Any]:
    parameters = task_parameters(
        queue_url=queue_url,
        repository_id=prefix_repo,
        pipeline=pipeline,
        definition=DIGEST,
        stage_type="human",
        config={"type": "human", "human": {"wait_for": "approval", "from": "maintainers"}},
    )
    return {
        "StartAt": "Approve",
        "States": {
            "Approve": {"Type": "Task", "Resource": SEND_AND_WAIT, "Parameters": parameters, "End": True}
        },
    }


class Recording:
    """The moto client, with the runs it was asked to stop written down: moto 5.2.5 leaves a run
    whose stage waits for its token RUNNING after StopExecution (AWS: ABORTED), so what was
    stopped is read here (docs/architecture.md, "Pipelines on Step Functions")."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.stopped: list[tuple[str, str]] = []

    def stop_execution(self, **kwargs: Any) -> Any:
        self.stopped.append((kwargs["executionArn"], kwargs.get("cause", "")))
        return self.client.stop_execution(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


def recorded(stack: Stack) -> tuple[PipelineRuns, Recording]:
    client = Recording(stack.sfn)
    return PipelineRuns(Pipelines(prefix=PREFIX, role_arn=ROLE, client=client)), client


def waiting(stack: Stack, count: int) -> None:
    stack.messages(count)  # the stages' tasks are on the queue: their TaskScheduled is in the history


@pytest.fixture
def stack() -> Iterator[Stack]:
    with step_functions() as made:
        yield made


def test_a_run_shows_its_stage_version_issue_and_console_link(stack: Stack) -> None:
    first = stack.pipelines.ensure(42, "review", human(stack.queue_url, "review"))
    second = stack.pipelines.ensure(42, "review", {**human(stack.queue_url, "review"), "Comment": "v2"})
    arn = stack.pipelines.start(second.version_arn, execution_name("d-1"), run_input(42, 7)).execution_arn
    waiting(stack, 1)
    runs = PipelineRuns(stack.pipelines)
    shown = runs.summary(runs.arn(run_id(arn)))
    assert shown is not None and first.version_arn != second.version_arn
    assert (shown.pipeline, shown.version, shown.issue_number, shown.status) == ("review", 2, 7, "RUNNING")
    assert [(w.state, w.waits_for) for w in shown.waiting] == [
        ("Approve", "1 human approval from maintainers")
    ]
    assert shown.console == console_url(arn) and "us-east-1.console.aws.amazon.com" in shown.console


def test_another_deployments_runs_are_neither_listed_nor_stopped(stack: Stack) -> None:
    """The attacker's angle: an operator of deployment "sq" names a run of "sq-prod" (same
    account, a prefix that begins like ours) or of an unrelated machine; nothing of theirs moves."""
    ours = stack.pipelines.ensure(42, "review", human(stack.queue_url, "review"))
    theirs = Pipelines(prefix="sq-prod", role_arn=ROLE, client=stack.sfn).ensure(
        42, "review", human(stack.queue_url, "review")
    )
    mine = stack.pipelines.start(ours.version_arn, execution_name("a"), run_input(42, 7)).execution_arn
    other = stack.pipelines.start(theirs.version_arn, execution_name("b"), run_input(42, 7)).execution_arn
    waiting(stack, 2)
    runs, client = recorded(stack)
    assert [r.execution_arn for r in runs.listing().runs] == [mine]
    for named in (other, run_id(other), "sq-prod_42-review:" + other.rsplit(":", 1)[1]):
        with pytest.raises(RunRefusedError, match="not a run of this deployment's pipelines"):
            runs.cancel(named, "hostile")
        with pytest.raises(RunRefusedError):
            runs.summary(runs.arn(named))
    assert client.stopped == []
    assert stack.sfn.describe_execution(executionArn=other)["status"] == "RUNNING"
    with pytest.raises(RunRefusedError, match="names no run"):
        runs.cancel("sq_42-review", "no run name")


def test_list_filters_bounds_and_counts_the_rest(stack: Stack) -> None:
    made = stack.pipelines.ensure(42, "review", human(stack.queue_url, "review"))
    other_repo = stack.pipelines.ensure(43, "review", human(stack.queue_url, "review", 43))
    for n in range(3):
        stack.pipelines.start(made.version_arn, execution_name(f"r{n}"), run_input(42, n + 1))
    stack.pipelines.start(other_repo.version_arn, execution_name("x"), run_input(43, 1))
    waiting(stack, 4)
    runs = PipelineRuns(stack.pipelines)
    listing = runs.listing(repository_ids=[42], status="RUNNING", limit=2)
    assert (len(listing.runs), listing.more) == (2, 1)
    assert {r.repository_id for r in listing.runs} == {42}
    assert runs.listing(repository_ids=[42], status="SUCCEEDED").runs == []
    assert len(runs.listing().runs) == 4


def test_cancel_stops_the_run_and_its_sub_pipeline_run(stack: Stack) -> None:
    child = stack.pipelines.ensure(42, "child", human(stack.queue_url, "child"))
    parent = stack.pipelines.ensure(
        42,
        "parent",
        {
            "StartAt": "Sub",
            "States": {
                "Sub": {
                    "Type": "Task",
                    "Resource": START_CHILD,
                    "Parameters": child_parameters(child.version_arn),
                    "End": True,
                }
            },
        },
    )
    arn = stack.pipelines.start(parent.version_arn, execution_name("p"), run_input(42, 7)).execution_arn
    waiting(stack, 1)
    runs, client = recorded(stack)

    def with_child() -> RunSummary | None:
        found = runs.summary(arn)
        return found if found is not None and found.children else None

    shown = wait_for("the child run in the history", with_child)
    (child_arn,) = shown.children
    assert [w.waits_for for w in shown.waiting] == [f"its sub-pipeline run {run_id(child_arn)}"]
    assert runs.cancel(run_id(arn), "wrong issue (operator:me)") == [arn, child_arn]
    assert client.stopped == [(arn, "wrong issue (operator:me)"), (child_arn, "wrong issue (operator:me)")]


# --- the CLI, on a local stack's moto server ------------------------------------------------


@pytest.fixture
def local_stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Target, Any]]:
    """A moto server standing in for the running local stack (executions run), one agent of
    octo/shop (repository 42), and a shell without AWS credentials."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    moto_step_functions.patch()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        for path, body in (("reset", b""), ("config", b'{"stepfunctions": {"execute_state_machine": true}}')):
            request = urllib.request.Request(f"{endpoint}/moto-api/{path}", data=body, method="POST")  # noqa: S310
            urllib.request.urlopen(request).close()  # noqa: S310 (loopback)
        target = Target(
            table_name="registry",
            queue_url="",
            dead_letter_queue_url="",
            endpoint=endpoint,
            region="us-east-1",
            pipeline_prefix=PREFIX,
            pipeline_role_arn=ROLE,
        )
        target.dynamodb().create_table(TableName="registry", **TABLE_DEFINITION)
        sqs = boto3.client("sqs", **target._where())
        queue = sqs.create_queue(QueueName="events.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        at = datetime(2026, 11, 28, tzinfo=UTC)
        agent = AgentRecord(
            agent_id="42-7-feat-dev",
            role="feat-dev",
            kind=RoleKind.DEV,
            repo_id=42,
            repo_full_name="octo/shop",
            issue_number=7,
            status=AgentStatus.ACTIVE,
            created_at=at,
            updated_at=at,
        )
        DynamoRegistry("registry", client=target.dynamodb()).put_agent(AgentWrite(agent, None))
        target.write(tmp_path)
        yield target, queue
    finally:
        server.stop()


def cli(tmp_path: Path, *command: str) -> tuple[int, str]:
    out = io.StringIO()
    status = main(["pipelines", *command, "--local", "--state", str(tmp_path)], out=out)
    return status, out.getvalue()


def test_the_cli_lists_shows_and_cancels_a_local_run(tmp_path: Path, local_stack: tuple[Target, Any]) -> None:
    """A run that waits in a delay (moto's server runs no SQS task of its own state machines: its
    interpreter calls SQS at moto's default address)."""
    target, _ = local_stack
    pipelines = Pipelines(prefix=PREFIX, role_arn=ROLE, client=target.stepfunctions())
    made = pipelines.ensure(
        42,
        "review",
        {"StartAt": "Delay", "States": {"Delay": {"Type": "Wait", "Seconds": 86400, "End": True}}},
    )
    arn = pipelines.start(made.version_arn, execution_name("cli"), run_input(42, 7)).execution_arn
    history = target.stepfunctions().get_execution_history
    wait_for(
        "the delay", lambda: any(e["type"] == "WaitStateEntered" for e in history(executionArn=arn)["events"])
    )

    status, listed = cli(tmp_path, "list", "--repo", "octo/shop", "--status", "RUNNING")
    assert status == 0, listed
    assert run_id(arn) in listed and "Delay (a delay)" in listed

    status, shown = cli(tmp_path, "show", run_id(arn), "--json")
    assert status == 0, shown
    row = json.loads(shown)
    assert (row["version"], row["issue"], row["console"]) == (1, 7, console_url(arn))
    assert [(w["state"], w["waits_for"]) for w in row["waiting"]] == [("Delay", "a delay")]

    status, said = cli(tmp_path, "cancel", run_id(arn), "--reason", "wrong issue")
    assert (status, said) == (0, f"stopped {run_id(arn)}\n")
    held = target.stepfunctions().describe_execution(executionArn=arn)
    assert held["status"] == "ABORTED", held  # moto keeps no cause of a stopped run

    status, said = cli(tmp_path, "show")
    assert status == EXIT_PROBLEMS and "needs a run" in said
    status, said = cli(tmp_path, "cancel", "other_42-review:run-x")
    assert status == EXIT_PROBLEMS and "not a run of this deployment's pipelines" in said


def test_a_stack_without_pipelines_says_so() -> None:
    with mock_aws():
        bare = Target(table_name="t", queue_url="", dead_letter_queue_url="", region="us-east-1")
        with pytest.raises(OperatorError, match="this stack runs no pipelines yet"):
            Operations(bare).pipeline_runs()
        stack = {
            "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
            "Outputs": {
                **{
                    key: {"Value": key}
                    for key in (
                        "RegistryTableName",
                        "EventsQueueUrl",
                        "EventsDeadLetterQueueUrl",
                        "GitHubAppPrivateKeySecretName",
                    )
                },
                "PipelinePrefix": {"Value": "squadron-dev"},
                "PipelineRoleArn": {"Value": ROLE},
            },
        }
        boto3.client("cloudformation").create_stack(StackName="Squadron-dev", TemplateBody=json.dumps(stack))
        found = stack_target("Squadron-dev")
        assert (found.pipeline_prefix, found.pipeline_role_arn) == ("squadron-dev", ROLE)
        assert Operations(found).pipeline_runs().prefix == "squadron-dev"
