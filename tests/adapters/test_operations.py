"""The operator's reads and repairs on AWS (moto): the stack by its outputs, agents, the DLQ."""

from __future__ import annotations

import dataclasses
import io
import json
import re
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.server import ThreadedMotoServer

from squadron.adapters.dynamo_memory import DynamoMemory
from squadron.adapters.dynamo_registry import TABLE_DEFINITION, DynamoRegistry
from squadron.adapters.operations import Operations, OperatorError, Target, local_target, stack_target
from squadron.cli import main
from squadron.domain.agents import AgentRecord, AgentStatus, InboxItem, RoleKind
from squadron.domain.commands import StartRetrospective
from squadron.domain.effects import AgentWrite
from squadron.domain.events import EventEnvelope
from squadron.domain.memory import MemoryPolicy, Writer
from squadron.shell.memory import Memory

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def record(number: int, status: AgentStatus, repo: str = "octo/shop", **changes: object) -> AgentRecord:
    return AgentRecord.model_validate(
        {
            "agent_id": f"1-{number}-feat-dev",
            "role": "feat-dev",
            "kind": RoleKind.DEV,
            "repo_id": 1,
            "repo_full_name": repo,
            "issue_number": number,
            "status": status,
            "created_at": T0,
            "updated_at": T0,
            **changes,
        }
    )


@pytest.fixture
def target() -> Iterator[Target]:
    with mock_aws():
        dynamodb = boto3.client("dynamodb")
        dynamodb.create_table(TableName="registry", **TABLE_DEFINITION)
        sqs = boto3.client("sqs")
        dlq = sqs.create_queue(QueueName="events-dlq.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        queue = sqs.create_queue(QueueName="events.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        yield Target(table_name="registry", queue_url=queue, dead_letter_queue_url=dlq)


def test_agents_of_every_status_and_of_one_repository(target: Target) -> None:
    registry = DynamoRegistry(target.table_name, client=target.dynamodb())
    for agent in (
        record(1, AgentStatus.ACTIVE),
        record(2, AgentStatus.SLEEPING, blocked_by=frozenset({1})),
        record(3, AgentStatus.COMPLETED, repo="octo/other"),
    ):
        registry.put_agent(AgentWrite(agent, None))
    operations = Operations(target)
    assert sorted(a.agent_id for a in operations.agents()) == ["1-1-feat-dev", "1-2-feat-dev", "1-3-feat-dev"]
    assert sorted(a.agent_id for a in operations.agents("octo/shop")) == ["1-1-feat-dev", "1-2-feat-dev"]
    registry.deliver(
        InboxItem(agent_id="1-1-feat-dev", delivery_id="d1", received_at=T0, kind="comment", summary="hi")
    )
    agent, inbox = operations.agent("1-1-feat-dev")
    assert (agent.status, [i.summary for i in inbox]) == (AgentStatus.ACTIVE, ["hi"])
    with pytest.raises(OperatorError, match="no agent 9-9-feat-dev in registry"):
        operations.agent("9-9-feat-dev")


def test_the_dead_letter_queue_is_listed_without_being_taken_then_redriven(target: Target) -> None:
    sqs = target.sqs()
    for n in (1, 2):
        body = {"delivery_id": f"d{n}", "event": "issues", "action": "opened"}
        sqs.send_message(
            QueueUrl=target.dead_letter_queue_url,
            MessageBody=json.dumps(body),
            MessageGroupId=f"1#{n}",
            MessageDeduplicationId=f"d{n}",
        )
    operations = Operations(target)
    listed = operations.dead_letters()
    assert [(m["group"], m["delivery_id"], m["event"]) for m in listed] == [
        ("1#1", "d1", "issues.opened"),
        ("1#2", "d2", "issues.opened"),
    ]
    assert len(operations.dead_letters()) == 2  # looking took nothing
    assert operations.redrive() == 2
    assert operations.dead_letters() == []
    moved = sqs.receive_message(
        QueueUrl=target.queue_url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"]
    )
    assert sorted(m["Attributes"]["MessageGroupId"] for m in moved["Messages"]) == ["1#1", "1#2"]


TEMPLATE = {
    "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
    "Outputs": {
        "RegistryTableName": {"Value": "squadron-registry"},
        "EventsQueueUrl": {"Value": "https://sqs.us-east-1.amazonaws.com/1/events.fifo"},
        "EventsDeadLetterQueueUrl": {"Value": "https://sqs.us-east-1.amazonaws.com/1/events-dlq.fifo"},
        "GitHubAppPrivateKeySecretName": {"Value": "squadron-dev/github-app-private-key"},
        "GitHubAppId": {"Value": "123456"},
    },
}


def test_a_deployed_stack_is_found_by_its_outputs() -> None:
    with mock_aws():
        cloudformation = boto3.client("cloudformation")
        cloudformation.create_stack(StackName="Squadron-dev", TemplateBody=json.dumps(TEMPLATE))
        partial = {**TEMPLATE, "Outputs": {"EventsQueueUrl": {"Value": "x"}}}
        cloudformation.create_stack(StackName="Other", TemplateBody=json.dumps(partial))
        target = stack_target("Squadron-dev")
        assert (target.table_name, target.region, target.app_id) == ("squadron-registry", "us-east-1", 123456)
        with pytest.raises(OperatorError, match="no stack Squadron-prod in us-east-1: deploy it"):
            stack_target("Squadron-prod")
        with pytest.raises(
            OperatorError,
            match="no output RegistryTableName, EventsDeadLetterQueueUrl, GitHubAppPrivateKeySecretName",
        ):
            stack_target("Other")


def test_the_local_stack_must_be_running(tmp_path: Path) -> None:
    with pytest.raises(OperatorError, match="no local stack is running with state in"):
        local_target(tmp_path)
    Target(table_name="t", queue_url="q", dead_letter_queue_url="d", endpoint="http://127.0.0.1:9").write(
        tmp_path
    )
    with pytest.raises(OperatorError, match=re.escape("does not answer on http://127.0.0.1:9")):
        local_target(tmp_path)


@pytest.mark.parametrize("command", [["status"], ["agent", "show", "1-1-feat-dev"], ["dlq", "list"]])
def test_every_operator_command_says_when_the_stack_is_not_there(tmp_path: Path, command: list[str]) -> None:
    out = io.StringIO()
    status = main([*command, "--local", "--state", str(tmp_path)], out=out)
    assert status == 3
    assert (
        out.getvalue() == f"no local stack is running with state in {tmp_path} (start it with `make local`)\n"
    )


@pytest.fixture
def plain_shell(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A shell with no AWS credentials anywhere (no variables, no profile, no files)."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SECURITY_TOKEN", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


LOCAL_COMMANDS = [
    # (case id, the command, what its output starts with)
    ("status", ["status", "--json"], "["),
    ("agent-show", ["agent", "show", "1-7-feat-dev", "--json"], "{"),
    ("dlq-list", ["dlq", "list", "--json"], "[]"),
]


@pytest.mark.parametrize(
    ("command", "starts"), [row[1:] for row in LOCAL_COMMANDS], ids=[row[0] for row in LOCAL_COMMANDS]
)
def test_the_local_stack_is_read_from_a_plain_shell(
    tmp_path: Path, local_stack: Target, command: list[str], starts: str
) -> None:
    """`squadron status --local` from a terminal with no AWS setup: the local stack's stand-in
    credentials, never the caller's (there are none)."""
    out = io.StringIO()
    assert main([*command, "--local", "--state", str(tmp_path)], out=out) == 0, out.getvalue()
    assert out.getvalue().startswith(starts)
    if command[0] != "dlq":
        assert "1-7-feat-dev" in out.getvalue()


@pytest.fixture
def local_stack(tmp_path: Path, plain_shell: None) -> Iterator[Target]:
    """A moto server standing in for the running local stack, with one agent of octo/shop."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        reset = urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST")  # noqa: S310 (loopback)
        urllib.request.urlopen(reset).close()  # noqa: S310
        aws: dict[str, Any] = {
            "endpoint_url": endpoint,
            "region_name": "us-east-1",
            "aws_access_key_id": "x",
            "aws_secret_access_key": "x",
        }
        boto3.client("dynamodb", **aws).create_table(TableName="registry", **TABLE_DEFINITION)
        sqs = boto3.client("sqs", **aws)
        dlq = sqs.create_queue(QueueName="dlq.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        queue = sqs.create_queue(QueueName="events.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        target = Target(
            table_name="registry",
            queue_url=queue,
            dead_letter_queue_url=dlq,
            endpoint=endpoint,
            region="us-east-1",
        )
        DynamoRegistry("registry", client=target.dynamodb()).put_agent(
            AgentWrite(record(7, AgentStatus.ACTIVE), None)
        )
        target.write(tmp_path)
        yield target
    finally:
        server.stop()


def test_people_list_show_confirm_pin_and_forget_what_agents_remember(
    local_stack: Target, tmp_path: Path
) -> None:
    memory = Memory(DynamoMemory(local_stack.table_name, client=local_stack.dynamodb()), clock=lambda: T0)
    writer = Writer(
        agent_id="1-7-feat-dev",
        role="feat-dev",
        kind="dev",
        repo_id=1,
        repo_full_name="octo/shop",
        issue_number=7,
    )
    for text in ("Tests need Redis on 6379", "Never touch the payments module"):
        memory.remember(writer, text=text, evidence="#7", audience="repository", policy=MemoryPolicy())
    redis, payments = (next(f for f in memory.all(1) if word in f.text) for word in ("Redis", "payments"))

    def run(*command: str) -> tuple[int, str]:
        out = io.StringIO()
        code = main(["memory", *command, "--repo", "octo/shop", "--local", "--state", str(tmp_path)], out=out)
        return code, out.getvalue()

    code, listed = run("list")
    assert code == 0 and redis.fact_id in listed and "proposed" in listed and "Never touch" in listed
    code, shown = run("show", redis.fact_id, "--json")
    assert code == 0 and json.loads(shown)["evidence"] == {"kind": "issue", "number": 7, "comment_id": None}
    assert run("confirm", redis.fact_id, "--by", "alice")[0] == 0
    assert run("pin", payments.fact_id)[0] == 0
    facts = {f.fact_id: f for f in memory.all(1)}
    assert (facts[redis.fact_id].status, facts[redis.fact_id].confirmed_by) == ("confirmed", "alice")
    assert facts[payments.fact_id].pinned and str(facts[payments.fact_id].confirmed_by).startswith(
        "operator:"
    )
    assert run("forget", redis.fact_id) == (0, f"forgot {redis.fact_id}\n")
    assert run("forget", redis.fact_id)[0] == 1
    assert [f.fact_id for f in memory.all(1)] == [payments.fact_id]
    code, said = run("show", "m-000000000000")
    assert code == 1 and "no fact m-000000000000" in said
    code, said = run("pin")
    assert code == 1 and "needs a fact id" in said
    out = io.StringIO()
    code = main(["memory", "list", "--repo", "octo/none", "--local", "--state", str(tmp_path)], out=out)
    assert code == 3 and "no agent of octo/none" in out.getvalue()


@pytest.mark.parametrize(
    ("api_url", "link"),
    [
        ("https://api.github.com", "https://github.com/octo/shop/issues/7"),
        ("https://ghe.example.com/api/v3", "https://ghe.example.com/octo/shop/issues/7"),
    ],
    ids=["github.com", "enterprise server"],
)
def test_memory_show_links_the_evidence_on_the_stacks_github(
    local_stack: Target, tmp_path: Path, api_url: str, link: str
) -> None:
    """The link is built from the GitHub the stack is configured with, never github.com's."""
    dataclasses.replace(local_stack, github_api_url=api_url).write(tmp_path)
    memory = Memory(DynamoMemory(local_stack.table_name, client=local_stack.dynamodb()), clock=lambda: T0)
    writer = Writer(
        agent_id="1-7-feat-dev",
        role="feat-dev",
        kind="dev",
        repo_id=1,
        repo_full_name="octo/shop",
        issue_number=7,
    )
    memory.remember(
        writer, text="Tests need Redis", evidence="#7", audience="repository", policy=MemoryPolicy()
    )
    (fact,) = memory.all(1)
    out = io.StringIO()
    where = ["--repo", "octo/shop", "--local", "--state", str(tmp_path)]
    assert main(["memory", "show", fact.fact_id, *where], out=out) == 0, out.getvalue()
    (evidence,) = [line for line in out.getvalue().splitlines() if line.startswith("evidence")]
    assert evidence.split()[-1] == link


def test_an_operator_starts_a_retrospective_on_the_queue(local_stack: Target, tmp_path: Path) -> None:
    out = io.StringIO()
    where = ["--local", "--state", str(tmp_path)]
    code = main(["retro", "start", "--repo", "octo/shop", "--days", "14", "--json", *where], out=out)
    assert code == 0, out.getvalue()
    delivery = json.loads(out.getvalue())["delivery_id"]
    sqs = local_stack.sqs()
    (message,) = sqs.receive_message(QueueUrl=local_stack.queue_url, AttributeNames=["All"])["Messages"]
    envelope = EventEnvelope.from_message(message["Body"])
    assert isinstance(envelope.command, StartRetrospective)
    assert (envelope.command.trigger, envelope.command.window_days, envelope.delivery_id) == (
        "operator",
        14,
        delivery,
    )
    assert message["Attributes"]["MessageGroupId"] == "1#repo"
    out = io.StringIO()
    assert main(["retro", "start", "--repo", "octo/none", *where], out=out) == 3
    assert "no agent of octo/none" in out.getvalue()
    assert main(["retro", "start", "--repo", "octo/shop", "--days", "0", *where], out=io.StringIO()) == 1
