"""The agent host end to end: the real Copilot CLI and SDK, a scripted model on 127.0.0.1,
the DynamoDB registry and events.fifo under moto, and a recording GitHub.

A dev agent starts, calls framework tools, reports blocked and its host exits;
the router puts it to sleep and wakes it when the blocker closes; a new host
resumes the same session (the model sees the earlier conversation) and drains
its inbox. A model that loops on tools is stopped by the circuit breaker and
the issue is handed to humans.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import boto3
import pytest
from moto import mock_aws

from squadron.adapters.dynamo_registry import TABLE_DEFINITION, DynamoRegistry
from squadron.adapters.github.client import GitHubClient
from squadron.adapters.github.http import GitHubHttp
from squadron.adapters.sqs import SqsEventQueue
from squadron.agent.copilot_runtime import CopilotRuntime
from squadron.agent.host import AgentHost, HostResult
from squadron.agent.prompts import IssueFacts
from squadron.config import load_directory
from squadron.config.parse import SquadronConfig
from squadron.config.policy import routing_policy
from squadron.domain.agents import AgentRecord, AgentStatus
from squadron.domain.events import EventEnvelope
from squadron.domain.permissions import Caller, CallerKind
from squadron.shell.router import RouterService
from tests.support.events import T0, Events
from tests.support.fake_registry import FakeLauncher, FakeRouterGitHub
from tests.support.github_fake import FakeGitHub
from tests.support.scripted_model import Say, ScriptedModel, ToolCall, serve

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

pytestmark = pytest.mark.agent

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / "node_modules" / "@github" / "copilot-linux-x64" / "copilot"
#: The CLI unpacks itself here on first run (~235 MB); kept between runs.
CLI_CACHE = ROOT / "tests" / ".cache" / "copilot-xdg"
A38 = "1-38-feat-dev"


@dataclass
class Stack:
    registry: DynamoRegistry
    sqs: SQSClient
    queue_url: str
    router: RouterService
    launcher: FakeLauncher
    github: FakeGitHub
    events: Events
    config: SquadronConfig
    home: Path

    def route(self, event: EventEnvelope) -> None:
        self.router.process(event)

    def route_queued(self) -> list[EventEnvelope]:
        """Route what the agent host put on events.fifo (as the router Lambda would)."""
        messages = self.sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10).get(
            "Messages", []
        )
        envelopes = [EventEnvelope.from_message(m["Body"]) for m in messages]
        for envelope, message in zip(envelopes, messages, strict=True):
            self.route(envelope)
            self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"])
        return envelopes

    def agent(self) -> AgentRecord:
        record = self.registry.get_agent(A38)
        assert record is not None
        return record

    def host(self, model: ScriptedModel) -> AgentHost:
        agent = self.agent()
        assert agent.pending_launch is None  # the launcher confirmed the task
        token = f"{agent.agent_id}-g{agent.generation}-l{agent.counters.launches}"
        http = GitHubHttp(transport=self.github.transport(), sleep=lambda s: None)

        def client(caller: Caller) -> GitHubClient:
            return GitHubClient(
                http=http, token=lambda: "ghs_narrow", installation_id=77, repo="octo/repo", caller=caller
            )

        return AgentHost(
            agent_id=A38,
            launch_token=token,
            registry=self.registry,
            queue=SqsEventQueue(self.queue_url, client=self.sqs),
            config=self.config,
            runtime=CopilotRuntime(
                cli_path=str(CLI),
                home=str(self.home),
                env={
                    "PATH": os.environ.get("PATH", ""),
                    "HOME": str(self.home),
                    "XDG_CACHE_HOME": str(CLI_CACHE),
                },
            ),
            agent_github=lambda a: client(Caller(CallerKind.DEV, a.display_name, a.role, a.branch)),
            framework_github=lambda a: client(Caller.framework()),
            provider=model.provider(),
            facts=IssueFacts(title="Add the export API", url="https://github.com/octo/repo/issues/38"),
            timeout_seconds=60,
        )


def run(host: AgentHost) -> HostResult:
    return asyncio.run(host.run())


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    if not CLI.exists():
        raise RuntimeError(f"{CLI} is missing: run `make test` (npm ci installs @github/copilot)")
    CLI_CACHE.mkdir(parents=True, exist_ok=True)
    yield from _stack(tmp_path, load_directory(ROOT / ".squadron"))


def _stack(tmp_path: Path, config: SquadronConfig) -> Iterator[Stack]:
    with mock_aws():
        dynamodb = boto3.client("dynamodb")
        dynamodb.create_table(TableName="registry", **TABLE_DEFINITION)
        registry = DynamoRegistry("registry", client=dynamodb)
        sqs = boto3.client("sqs")
        url = sqs.create_queue(
            QueueName="events.fifo", Attributes={"FifoQueue": "true", "VisibilityTimeout": "0"}
        )["QueueUrl"]
        launcher = FakeLauncher()
        router = RouterService(
            registry=registry,
            launcher=launcher,
            github=FakeRouterGitHub({"alice": "write"}),
            policies=lambda _event: routing_policy(config),
            clock=lambda: T0 + timedelta(hours=1),
        )
        yield Stack(
            registry,
            sqs,
            url,
            router,
            launcher,
            FakeGitHub(),
            Events(full_name="octo/repo"),
            config,
            tmp_path / "copilot-home",
        )


def _tool_results(model: ScriptedModel, index: int = -1) -> list[str]:
    return [str(m.get("content")) for m in model.requests[index]["messages"] if m.get("role") == "tool"]


def test_a_dev_agent_sleeps_on_a_blocker_and_resumes_its_session(stack: Stack) -> None:
    e = stack.events
    stack.route(e.comment(38, "Please use the v2 schema"))  # before the assignment: nobody to tell yet
    stack.route(e.assigned(38))
    stack.route(e.comment(38, "Remember the v2 schema"))
    assert stack.agent().status is AgentStatus.CREATED

    model = ScriptedModel(
        [
            ToolCall("check_for_events", {}),
            ToolCall("report_blocked", {"blocker_issue": 42, "reason": "needs the export endpoint"}),
            Say("Blocked on #42; sleeping."),
        ]
    )
    with serve(model):
        first = run(stack.host(model))
    assert first.outcome == "sleeping"
    assert "Remember the v2 schema" in _tool_results(model, 1)[0]  # check_for_events drained the inbox
    assert stack.registry.pending_inbox(A38) == []
    agent = stack.agent()
    assert (agent.status, agent.lease_owner) == (AgentStatus.ACTIVE, None)  # lease released on exit

    (command,) = stack.route_queued()
    assert command.command is not None and command.command.launch_token == f"{A38}-g1-l1"
    agent = stack.agent()
    assert (agent.status, agent.blocked_by) == (AgentStatus.SLEEPING, frozenset({42}))

    stack.route(e.closed(42))
    agent = stack.agent()
    assert agent.status is AgentStatus.ACTIVE
    assert len(stack.launcher.tasks_for(A38)) == 2

    woken = ScriptedModel(
        [
            ToolCall("check_for_events", {}),
            ToolCall("open_pr", {"title": "Export API", "body": "Closes #38. Tested with pytest."}),
            ToolCall("report_complete", {"summary": "Opened the PR for the export API."}),
            Say("Back at work on #38: PR open."),
        ]
    )
    with serve(woken):
        second = run(stack.host(woken))
    assert second.outcome == "idle"
    assert second.detail == "Opened the PR for the export API."
    seen = " ".join(woken.contents_seen(0))
    # The resumed session carries the earlier conversation: its prompt and tool results.
    assert 'Start on issue #38: "Add the export API"' in seen
    assert "Registered: #38 is blocked by #42" in seen
    assert "woken because: blocker #42 was closed" in seen.replace("\n", " ")
    assert "blocker #42 of #38 was closed" in _tool_results(woken, 1)[-1]
    assert stack.registry.pending_inbox(A38) == []
    agent = stack.agent()
    assert (agent.status, agent.task_arn, agent.lease_owner) == (AgentStatus.ACTIVE, None, None)  # idle
    pull = next(r for r in stack.github.requests if r.method == "POST" and r.url.path.endswith("/pulls"))
    assert json.loads(pull.content)["head"] == "feat/issue-38"

    (echo,) = stack.route_queued()  # the App's own PR, told to the router by the host
    assert (echo.event, echo.action, echo.origin) == ("pull_request", "opened", "squadron")
    assert stack.registry.issue_view(1, 101).linked_issue == 38
    assert stack.registry.get_agent("1-101-pr-review") is not None  # the reviewer starts

    stack.route(e.review(101, "feat/issue-38", "changes_requested", body="Add a test for errors"))
    agent = stack.agent()
    assert agent.status is AgentStatus.ACTIVE
    assert len(stack.launcher.tasks_for(A38)) == 3  # the idle agent is woken by the review


def test_a_denied_action_reaches_the_model_and_github_sees_nothing(stack: Stack) -> None:
    definition = stack.config.agents["feat-dev"]
    stack.config = stack.config.model_copy(
        update={
            "agents": {
                **stack.config.agents,
                "feat-dev": definition.model_copy(update={"tools": [*definition.tools, "post_status"]}),
            }
        }
    )
    stack.route(stack.events.assigned(38))
    model = ScriptedModel(
        [ToolCall("post_status", {"state": "success", "description": "all good"}), Say("Could not post.")]
    )
    with serve(model):
        result = run(stack.host(model))
    assert result.outcome == "idle"
    (answer,) = _tool_results(model, 1)
    assert answer.startswith("denied: feat-dev-38 (dev role) may not post_status")
    assert stack.github.requests == []


def test_a_replaced_task_does_nothing(stack: Stack) -> None:
    stack.route(stack.events.assigned(38))
    model = ScriptedModel([Say("should never be asked")])
    host = stack.host(model)
    host.launch_token = f"{A38}-g1-l0"
    with serve(model):
        result = run(host)
    assert result.outcome == "superseded"
    assert model.requests == []
    assert stack.agent().status is AgentStatus.CREATED


def _with_tool_call_limit(config: SquadronConfig, limit: int) -> SquadronConfig:
    breakers = config.config.circuit_breakers
    defaults = breakers.defaults.model_copy(update={"max_tool_calls": limit})
    repo = config.config.model_copy(
        update={"circuit_breakers": breakers.model_copy(update={"defaults": defaults})}
    )
    return config.model_copy(update={"config": repo})


def test_a_looping_model_is_stopped_by_the_breaker_and_escalated(tmp_path: Path) -> None:
    config = _with_tool_call_limit(load_directory(ROOT / ".squadron"), 3)
    assert config.role("feat-dev").limits.max_tool_calls == 3
    CLI_CACHE.mkdir(parents=True, exist_ok=True)
    for stack in _stack(tmp_path, config):
        stack.route(stack.events.assigned(38))
        model = ScriptedModel(
            [ToolCall("check_for_events", {})] * 5
            + [Say("I could not stop."), Say("Summary: I looped on check_for_events.")]
        )
        with serve(model):
            result = run(stack.host(model))

        assert result.outcome == "escalated"
        denials = [r for r in _tool_results(model, 5) if "circuit breaker tripped" in r]
        assert len(denials) == 2  # the 4th and 5th calls never ran
        assert "tool_calls reached 4 of 3" in denials[0]
        agent = stack.agent()
        assert agent.status is AgentStatus.ESCALATED
        assert agent.escalation_reason is not None and "tool_calls" in agent.escalation_reason
        assert agent.lease_owner is None
        written = [
            (r.method, r.url.path, json.loads(r.content) if r.content else None)
            for r in stack.github.requests
        ]
        assert ("POST", "/repos/octo/repo/issues/38/labels", {"labels": ["needs-human"]}) in written
        assert any(m == "POST" and p == "/repos/octo/repo/issues" for m, p, _ in written)  # needs-human issue
        comment = next(body for m, p, body in written if p.endswith("/38/comments"))
        assert comment is not None
        assert comment["body"].startswith("[squadron:framework] feat-dev-38 needs a human")
        assert "Summary: I looped" in comment["body"]
