"""The agent host end to end: the real Copilot CLI and SDK, a scripted model on 127.0.0.1,
the agent gateway over the DynamoDB registry and events.fifo under moto, and a recording GitHub.

A dev agent starts, calls framework tools, reports blocked and its host exits;
the router puts it to sleep and wakes it when the blocker closes; a new host
resumes the same session (the model sees the earlier conversation) and drains
its inbox. A model that loops on tools is stopped by the circuit breaker and
the router hands the issue to humans. Run as root (CI), the CLI and the agent's
git run as the agent's own user, as in ECS.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from moto import mock_aws

from squadron.adapters.confinement import AgentDirs, AgentUser
from squadron.adapters.copilot import CopilotRuntime
from squadron.adapters.dynamo_registry import DynamoRegistry
from squadron.adapters.git import FrameworkClone, GitRemote, WorkingCopy
from squadron.adapters.github.client import GitHubClient
from squadron.adapters.github.http import GitHubHttp
from squadron.adapters.metrics import RecordedMetrics
from squadron.adapters.model_gateway import ModelGateway, Upstream
from squadron.adapters.sqs import SqsEventQueue
from squadron.agent.door import Transport
from squadron.agent.host import AgentHost, HostResult
from squadron.agent.janitor import Sweep
from squadron.agent.prompts import IssueFacts
from squadron.agent.tools import FrameworkTools, HostState
from squadron.agent.writes import GatewayWrites
from squadron.config import FRAMEWORK_TOOLS, load_directory
from squadron.config.parse import SquadronConfig
from squadron.config.policy import routing_policy
from squadron.domain.agents import INBOX_PAGE_ITEMS, AgentRecord, AgentStatus, InboxItem
from squadron.domain.commands import MAX_TOLD, RegisterBlocker, TaskEnded
from squadron.domain.cost import Cost
from squadron.domain.events import EventEnvelope
from squadron.domain.launches import LaunchRefusedError
from squadron.domain.metrics import totals
from squadron.domain.model_calls import CALLS_PER_TURN
from squadron.domain.permissions import Caller, agent_caller
from squadron.local.copilot_cli import unpack_cli
from squadron.shell.gateway import AgentGateway
from squadron.shell.router import RouterService
from tests.support.aws import drain, registry_and_queue
from tests.support.events import T0, Events
from tests.support.fake_registry import FakeLauncher, FakeRouterGitHub
from tests.support.gateway import door_of, gateway_for, in_process
from tests.support.git_remote import BareRemote, let_others_pass
from tests.support.github_fake import FakeGitHub
from tests.support.scripted_model import Say, ScriptedModel, Stall, ToolCall, Turn, serve

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

pytestmark = pytest.mark.agent

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / "node_modules" / "@github" / "copilot-linux-x64" / "copilot"
#: The CLI unpacks itself here on first run (~235 MB); kept between runs.
CLI_CACHE = ROOT / "tests" / ".cache" / "copilot-xdg"
A38 = "1-38-feat-dev"
#: The fake GitHub's PR head commit.
HEAD_SHA = "c" * 40


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
    remote: BareRemote
    #: Where every agent's directory lives (the EFS volume's stand-in).
    root: Path
    gateway: AgentGateway
    #: What tasks published through the gateway.
    metrics: RecordedMetrics

    def work(self, agent_id: str = A38) -> Path:
        return AgentDirs(self.root, agent_id).work

    def route(self, event: EventEnvelope) -> None:
        self.router.process(event)

    def route_queued(self) -> list[EventEnvelope]:
        """Route what the agent host put on events.fifo (as the router Lambda would)."""
        return drain(self.sqs, self.queue_url, self.router.process)

    def agent(self, agent_id: str = A38) -> AgentRecord:
        record = self.registry.get_agent(agent_id)
        assert record is not None
        return record

    def host(self, model: ScriptedModel, agent_id: str = A38, **options: Any) -> AgentHost:
        agent = self.agent(agent_id)
        assert agent.pending_launch is None  # the launcher confirmed the task
        http = GitHubHttp(transport=self.github.transport(), sleep=lambda s: None)
        door = door_of(self.gateway, self.launcher, agent, **options.pop("door", {}))
        # As deployed (squadron.agent.wiring): the clone pushes with the token the door vends.
        push_token = door.push_token if options.pop("push_through_door", False) else None

        def workspace(user: AgentUser, dirs: AgentDirs) -> WorkingCopy:
            return WorkingCopy(
                dirs.work,
                FrameworkClone(
                    dirs.framework_clone,
                    GitRemote(self.remote.url, lambda: "ghs_narrow", push_token=push_token),
                ),
                author_name=f"{agent.display_name} (squadron)",
                author_email="squadron[bot]@users.noreply.github.com",
                user=user,
                home=dirs.home,
                transfers=dirs.transfers,
            )

        def client(caller: Caller) -> GitHubClient:
            return GitHubClient(
                http=http, token=lambda: "ghs_narrow", installation_id=77, repo="octo/repo", caller=caller
            )

        return AgentHost(
            door=door,
            config=self.config,
            runtime=options.pop("runtime", None)
            or CopilotRuntime(
                cli_path=str(options.pop("cli_path", CLI)),
                home=str(self.root),
                env=cli_env(self.root),
            ),
            agent_github=lambda a: client(agent_caller(a)),
            # Through the task's model gateway when the test gives one (it holds the model's key).
            provider=options.pop("provider")
            if "provider" in options
            else gateway.provider()
            if (gateway := options.get("model_gateway"))
            else model.provider(),
            facts=options.pop(
                "facts",
                IssueFacts(
                    title="Add the export API",
                    url="https://github.com/octo/repo/issues/38",
                    head_sha=HEAD_SHA,
                ),
            ),
            timeout_seconds=60,
            agents_root=self.root,
            workspace=workspace,
            **options,
        )


def cli_env(home: Path) -> dict[str, str]:
    """The CLI's environment in these tests: PATH, HOME and its unpacked package."""
    return {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "XDG_CACHE_HOME": str(CLI_CACHE)}


def _unmarked(body: str) -> str:
    """A write's body without the key the gateway marks it with (each write carries one)."""
    text, marker = body.rsplit("\n\n", 1)
    assert re.fullmatch(r"<!-- squadron:effect [A-Za-z0-9._-]+\.w[0-9]+ -->", marker), body
    return text


def run(host: AgentHost) -> HostResult:
    return asyncio.run(host.run())


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    yield from _stack(tmp_path, load_directory(ROOT / ".squadron"))


def _stack(tmp_path: Path, config: SquadronConfig) -> Iterator[Stack]:
    # The fixed routing starts the agents here: the router is wired to fakes without Step
    # Functions, which the default pipelines' runs would need (tests.support.orchestration).
    config = config.model_copy(update={"config": config.config.model_copy(update={"orchestration": "fixed"})})
    unpack_cli(CLI, CLI_CACHE)
    root = tmp_path / "agents-root"
    root.mkdir()
    let_others_pass(root)  # agents' users reach their own directories through it, as on EFS
    with mock_aws():
        registry, sqs, url = registry_and_queue()
        launcher = FakeLauncher()
        router = RouterService(
            registry=registry,
            launcher=launcher,
            github=FakeRouterGitHub({"alice": "write", "bob": "write"}),  # bob reviews
            policies=lambda _event: routing_policy(config),
            clock=lambda: T0 + timedelta(hours=1),
        )
        github = FakeGitHub()
        metrics = RecordedMetrics()
        gateway = gateway_for(
            registry,
            SqsEventQueue(url, client=sqs),
            github,  # the gateway writes for the agents: the tests' GitHub records what they wrote
            clock=lambda: T0 + timedelta(hours=1),
            config=config,
            metrics=metrics,
        )
        yield Stack(
            registry,
            sqs,
            url,
            router,
            launcher,
            github,
            Events(full_name="octo/repo"),
            config,
            BareRemote.create(tmp_path / "github", {"README.md": "# octo/repo\n", "app.py": "print('v1')\n"}),
            root,
            gateway,
            metrics,
        )


stack_for = contextmanager(_stack)


def tool_results(model: ScriptedModel, index: int = -1) -> list[str]:
    return [str(m.get("content")) for m in model.requests[index]["messages"] if m.get("role") == "tool"]


def _dimensions(published: RecordedMetrics, *names: str) -> list[tuple[str, str] | None]:
    """The breakdowns published for ``names``, in order (what a task said about how it went)."""
    return [p.dimension for p in published.points if p.name in names]


def routed_at_once(stack: Stack) -> Transport:
    """The gateway as a task reaches it, with a router that is quick: what the task sends is
    routed before the task goes on (an agent that reports blocked sleeps before its task ends)."""
    served = in_process(stack.gateway)

    def call(request: dict[str, Any]) -> Mapping[str, Any]:
        answer = served(request)
        if request.get("op") == "send" and "error" not in answer:
            stack.route_queued()
        return answer

    return call


def test_an_agent_put_to_sleep_before_its_task_ends_has_its_work_on_its_branch(stack: Stack) -> None:
    stack.route(stack.events.assigned(38))
    work = stack.work()
    model = ScriptedModel(
        [
            ToolCall("create", {"path": str(work / "export.py"), "file_text": "def export():\n    ...\n"}),
            ToolCall("report_blocked", {"blocker_issue": 42, "reason": "needs the export endpoint"}),
            Say("Blocked on #42; sleeping."),
        ]
    )
    with serve(model):
        first = run(stack.host(model, door={"transport": routed_at_once(stack)}, push_through_door=True))
    assert first.outcome == "sleeping", tool_results(model)
    # The router put it to sleep while the session still ran; the save pushed all the same.
    assert stack.route_queued() == []  # (everything it sent was routed as it sent it)
    agent = stack.agent()
    assert (agent.status, agent.blocked_by) == (AgentStatus.SLEEPING, frozenset({42}))
    assert agent.launch_secret_hash is None and agent.lease_owner is None  # its launch has ended
    assert stack.remote.log("feat/issue-38")[0] == "WIP: blocked by #42: needs the export endpoint"
    assert stack.remote.show("feat/issue-38", "export.py") == "def export():\n    ..."
    assert first.saved.startswith("committed ") and "pushed" in first.saved, first.saved


@pytest.mark.parametrize("then", ["git_push", "open_pr"])
def test_a_push_after_report_blocked_is_refused_with_why_and_the_work_saved_once(
    stack: Stack, then: str
) -> None:
    """The model goes on after report_blocked (the router put its agent to sleep at once) and
    pushes. Pushed, the gateway would refuse its report (the agent no longer works) and the router
    would never hear of the new head: so the push is refused with why, nothing reaches the branch
    but the host's one save, and nothing the task sent is refused."""
    stack.route(stack.events.assigned(38))
    stack.route(stack.events.pr(101, "feat/issue-38", body="Closes #38"))
    work = stack.work()
    after = ToolCall("git_push", {"message": "one more thing"})
    if then == "open_pr":
        after = ToolCall("open_pr", {"title": "one more thing", "body": "Closes #38"})
    model = ScriptedModel(
        [
            ToolCall("create", {"path": str(work / "export.py"), "file_text": "def export():\n    ...\n"}),
            ToolCall("report_blocked", {"blocker_issue": 42, "reason": "needs the export endpoint"}),
            ToolCall("create", {"path": str(work / "more.py"), "file_text": "x = 1\n"}),
            after,
            Say("Blocked on #42; sleeping."),
        ]
    )
    routed = routed_at_once(stack)
    refused: list[str] = []

    def transport(request: dict[str, Any]) -> Mapping[str, Any]:
        answer = routed(request)
        if "error" in answer:
            refused.append(f"{request.get('op')}: {answer['error']}")
        return answer

    with serve(model):
        first = run(stack.host(model, door={"transport": transport}, push_through_door=True))
    assert first.outcome == "sleeping", tool_results(model)
    said = tool_results(model)[-1]
    assert "Not pushed: you ended your work (blocked by #42" in said and "end your turn" in said
    # No push whose report the gateway refused (its metrics, after the routed end, are refused).
    assert [r for r in refused if not r.startswith("metrics: ")] == []
    assert stack.agent().status is AgentStatus.SLEEPING
    log = stack.remote.log("feat/issue-38")
    assert log[0] == "WIP: blocked by #42: needs the export endpoint" and "one more thing" not in log
    assert stack.remote.show("feat/issue-38", "more.py") == "x = 1"  # saved once, by the host
    assert not [r for r in stack.github.requests if r.method == "POST" and r.url.path.endswith("/pulls")]


def test_a_dev_agent_sleeps_on_a_blocker_and_resumes_its_session(stack: Stack) -> None:
    e = stack.events
    stack.route(e.comment(38, "Please use the v2 schema"))  # before the assignment: nobody to tell yet
    stack.route(e.assigned(38))
    stack.route(e.comment(38, "Remember the v2 schema"))
    assert stack.agent().status is AgentStatus.CREATED

    work = stack.work()
    model = ScriptedModel(
        [
            ToolCall("check_for_events", {}),
            ToolCall("create", {"path": str(work / "export.py"), "file_text": "def export():\n    ...\n"}),
            ToolCall("report_blocked", {"blocker_issue": 42, "reason": "needs the export endpoint"}),
            Say("Blocked on #42; sleeping."),
        ]
    )
    published = stack.metrics
    with serve(model):
        first = run(stack.host(model))
    assert first.outcome == "sleeping", tool_results(model)
    assert _dimensions(published, "AgentTasks", "SessionStartSeconds") == [
        ("Outcome", "sleeping"),
        ("Mode", "create"),
    ]
    assert totals(published.points)["AgentToolCalls"] == 3
    assert "Created branch feat/issue-38 from main." in model.contents_seen(0)[-1]
    # The work in progress was committed and pushed before the task exited.
    assert stack.remote.log("feat/issue-38")[0] == "WIP: blocked by #42: needs the export endpoint"
    assert stack.remote.show("feat/issue-38", "export.py") == "def export():\n    ..."
    assert first.saved.startswith("committed ") and "pushed" in first.saved
    assert "Remember the v2 schema" in tool_results(model, 1)[0]  # check_for_events drained the inbox
    assert stack.registry.pending_inbox(A38) == []
    agent = stack.agent()
    assert (agent.status, agent.lease_owner) == (AgentStatus.ACTIVE, None)  # lease released on exit

    command, ended = stack.route_queued()
    assert isinstance(command.command, RegisterBlocker) and command.command.launch_token == f"{A38}-g1-l1"
    assert isinstance(ended.command, TaskEnded) and ended.command.outcome == "sleeping"
    assert stack.agent().counters.tool_calls == 3
    agent = stack.agent()
    assert (agent.status, agent.blocked_by) == (AgentStatus.SLEEPING, frozenset({42}))

    stack.route(e.closed(42))
    agent = stack.agent()
    assert agent.status is AgentStatus.ACTIVE
    assert len(stack.launcher.tasks_for(A38)) == 2

    woken = ScriptedModel(
        [
            ToolCall("check_for_events", {}),
            ToolCall("bash", {"command": "echo 'VERSION = 2' >> export.py", "description": "finish it"}),
            ToolCall("open_pr", {"title": "Export API", "body": "Closes #38. Tested with pytest."}),
            ToolCall("report_complete", {"summary": "Opened the PR for the export API."}),
            Say("Back at work on #38: PR open."),
        ]
    )
    published.points.clear()
    with serve(woken):
        second = run(stack.host(woken))
    assert second.outcome == "idle"
    assert _dimensions(published, "AgentTasks", "SessionStartSeconds") == [
        ("Outcome", "idle"),
        ("Mode", "resume"),
    ]
    assert second.detail == "Opened the PR for the export API."
    assert "Kept your working copy of feat/issue-38." in woken.contents_seen(0)[-1]
    # open_pr committed what the model changed with its host tools and pushed the branch first.
    assert stack.remote.log("feat/issue-38")[:2] == [
        "Export API",
        "WIP: blocked by #42: needs the export endpoint",
    ]
    assert stack.remote.show("feat/issue-38", "export.py").endswith("VERSION = 2")
    assert "Pushed" in tool_results(woken)[-2] and "Opened PR #101" in tool_results(woken)[-2]
    seen = " ".join(woken.contents_seen(0))
    system = [m for m in woken.requests[0]["messages"] if m.get("role") == "system"]
    assert "# Agent: feat-dev" in str(system)  # the role's definition is supplied again on resume
    # The resumed session carries the earlier conversation: its prompt and tool results.
    assert 'Start on issue #38: "Add the export API"' in seen
    assert "Registered: #38 is blocked by #42" in seen
    assert "woken because: blocker #42 was closed" in seen.replace("\n", " ")
    assert "blocker #42 of #38 was closed" in tool_results(woken, 1)[-1]
    assert stack.registry.pending_inbox(A38) == []
    pull = next(r for r in stack.github.requests if r.method == "POST" and r.url.path.endswith("/pulls"))
    assert json.loads(pull.content)["head"] == "feat/issue-38"

    opened, ended = stack.route_queued()  # the App's own PR, told to the router by the gateway
    assert (opened.event, opened.action, opened.origin, opened.source_agent) == (
        "squadron",
        "agent_opened_pull_request",
        "agent",
        A38,
    )
    assert isinstance(ended.command, TaskEnded) and ended.command.outcome == "idle"
    # What the task cost: the tokens of every model call, as the SDK reported them (the scripted
    # model answers 1 in, 1 out per call; the CLI makes calls of its own besides the turns).
    (spent,) = ended.command.usage.tokens
    assert spent.model == "claude-sonnet-4.5" and spent.input_tokens == spent.output_tokens > 0
    agent = stack.agent()
    assert (agent.status, agent.task_arn, agent.lease_owner) == (AgentStatus.ACTIVE, None, None)  # idle
    assert agent.launch_secret_hash is None  # the launch ended: its secret opens nothing now
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
    (answer,) = tool_results(model, 1)
    assert answer.startswith("denied: feat-dev-38 (dev role) may not post_status")
    assert stack.github.requests == []


def test_a_dev_agent_that_tries_to_merge_is_denied_and_github_sees_nothing(stack: Stack) -> None:
    stack.route(stack.events.assigned(38))
    main_before = stack.remote.sha("main")
    model = ScriptedModel(
        [
            ToolCall("bash", {"command": "gh pr merge 101 --squash", "description": "merge"}),
            ToolCall("bash", {"command": "git push origin HEAD:main", "description": "push"}),
            ToolCall(
                "bash",
                {
                    "command": "curl -X PUT https://api.github.com/repos/octo/repo/pulls/101/merge",
                    "description": "merge via the API",
                },
            ),
            Say("I may not merge."),
        ]
    )
    with serve(model):
        result = run(stack.host(model))
    assert result.outcome == "idle"
    merge, push, api = tool_results(model)
    assert "merging is not allowed to agents: Squadron merges when the approval flow is met" in merge
    assert "git push from the shell is not allowed: call git_push" in push
    assert "calling the GitHub API from the shell is not allowed" in api
    assert stack.github.requests == []
    assert stack.remote.sha("main") == main_before


def test_a_replaced_task_does_nothing(stack: Stack) -> None:
    stack.route(stack.events.assigned(38))
    model = ScriptedModel([Say("should never be asked")])
    host = stack.host(model, door={"launch_token": f"{A38}-g1-l0"})
    with serve(model):
        result = run(host)
    assert result.outcome == "superseded"
    assert "replaced by 1-38-feat-dev-g1-l1" in result.detail
    assert stack.metrics.points == []  # a replaced launch's task may not even publish
    assert model.requests == []
    assert stack.agent().status is AgentStatus.CREATED
    assert stack.route_queued() == []  # it said nothing


def _with_limits(config: SquadronConfig, **limits: Any) -> SquadronConfig:
    breakers = config.config.circuit_breakers
    defaults = breakers.defaults.model_copy(update=limits)
    repo = config.config.model_copy(
        update={"circuit_breakers": breakers.model_copy(update={"defaults": defaults, "roles": {}})}
    )
    return config.model_copy(update={"config": repo})


def test_a_looping_model_is_stopped_by_the_breaker_and_escalated(tmp_path: Path) -> None:
    config = _with_limits(load_directory(ROOT / ".squadron"), max_tool_calls=3)
    assert config.role("feat-dev").limits.max_tool_calls == 3
    with stack_for(tmp_path, config) as stack:
        stack.route(stack.events.assigned(38))
        script: list[Turn] = [ToolCall("check_for_events", {})] * 5
        model = ScriptedModel(
            [*script, Say("I could not stop."), Say("Summary: I looped on check_for_events.")]
        )
        published = stack.metrics
        with serve(model):
            result = run(stack.host(model))

        assert result.outcome == "escalated"
        assert _dimensions(published, "AgentTasks", "BreakerTrips") == [
            ("Outcome", "escalated"),
            ("Limit", "tool_calls"),
        ]
        assert totals(published.points)["AgentEscalations"] == 1
        denials = [r for r in tool_results(model, 5) if "circuit breaker tripped" in r]
        assert len(denials) == 2  # the 4th and 5th calls never ran
        assert "tool_calls reached 4 of 3" in denials[0]
        (ended,) = stack.route_queued()  # the router hands the issue to humans
        assert isinstance(ended.command, TaskEnded) and ended.command.outcome == "escalated"
        agent = stack.agent()
        assert agent.status is AgentStatus.ESCALATED
        assert agent.escalation_reason is not None and "tool_calls" in agent.escalation_reason
        assert agent.lease_owner is None
        humans = stack.router.github
        assert isinstance(humans, FakeRouterGitHub)
        assert ("octo/repo", 38, ("needs-human",)) in humans.labelled
        assert [c["title"] for c in humans.created] == ["needs-human: #38 (feat-dev-38)"]
        comment = _escalation_comment(stack)
        assert comment.startswith(
            "feat-dev-38 needs a human: circuit breaker tripped: tool_calls reached 4 of 3"
        )
        assert "Summary: I looped" in comment


def test_a_dev_agent_files_a_blocker_issue_and_sleeps_on_it(stack: Stack) -> None:
    stack.route(stack.events.assigned(38))
    model = ScriptedModel(
        [
            ToolCall("comment", {"number": 12, "body": "hijack"}),
            ToolCall(
                "create_blocker_issue",
                {
                    "title": "Export endpoint in the API",
                    "body": "GET /export returning CSV.",
                    "reason": "the export UI calls it",
                },
            ),
            Say("Filed #99 and sleeping."),
        ]
    )
    with serve(model):
        result = run(stack.host(model))
    assert result.outcome == "sleeping"
    refused, filed = tool_results(model)
    assert refused == "Not commented: you comment on your own issue or pull request (#38), not #12."
    assert filed.startswith("Filed #99. Registered: #38 is blocked by #99.")
    created = next(r for r in stack.github.requests if r.method == "POST" and r.url.path.endswith("/issues"))
    body = _unmarked(json.loads(created.content)["body"])
    assert body.startswith("[squadron:feat-dev-38] GET /export returning CSV.")
    assert body.endswith("Blocks #38: the export UI calls it")
    said = [
        _unmarked(json.loads(r.content)["body"])
        for r in stack.github.requests
        if r.url.path.endswith("/38/comments")
    ]
    assert said == ["[squadron:feat-dev-38] Blocked by #99: the export UI calls it"]

    routed = stack.route_queued()
    assert [(e.event, e.action) for e in routed] == [
        ("squadron", "agent_opened_issue"),
        ("squadron", "register_blocker"),
        ("squadron", "task_ended"),
    ]
    agent = stack.agent()
    assert (agent.status, agent.blocked_by) == (AgentStatus.SLEEPING, frozenset({99}))
    pm = stack.agent("1-pm")
    (item,) = stack.registry.pending_inbox(pm.agent_id)  # the PM triages the new issue
    assert item.kind == "issue_opened" and "#99 opened by squadron[bot]" in item.summary


def test_the_pm_triages_a_batch_in_a_fresh_session_and_its_assignment_starts_a_dev(stack: Stack) -> None:
    e = stack.events
    stack.route(e.opened(38))
    stack.route(e.opened(12))  # the blocker: a writer's issue too (the PM links vouched issues only)
    pm_id = "1-pm"
    assert stack.agent(pm_id).status is AgentStatus.CREATED
    model = ScriptedModel(
        [
            ToolCall("check_for_events", {}),
            ToolCall("label_issue", {"number": 38, "labels": ["urgent"]}),
            ToolCall("label_issue", {"number": 38, "labels": ["bug"]}),
            ToolCall("register_blocker", {"issue": 38, "blocked_by": 12, "reason": "needs the parser fix"}),
            ToolCall("assign_issue", {"number": 38, "role": "pr-review"}),
            ToolCall("assign_issue", {"number": 38, "role": "bug-fix"}),
            ToolCall("comment", {"number": 38, "body": "Triage: a bug; bug-fix takes it after #12."}),
            ToolCall("report_complete", {"summary": "Triaged #38 as a bug."}),
            Say("Done."),
        ]
    )
    with serve(model):
        result = run(stack.host(model, pm_id))
    assert result.outcome == "idle"
    answers = tool_results(model)
    assert "#38 opened by alice\n  Issue 38" in answers[0]
    assert answers[1].startswith("Not labelled: urgent not in the taxonomy. Labels: blocked, bug,")
    assert answers[2] == "#38 now has labels: bug."
    assert answers[3].startswith("Sent: #38 is blocked by #12.")
    assert answers[4].startswith("Not assigned: pr-review is not a dev role. Dev roles: bug-fix, feat-dev")
    assert answers[5] == "Assigned #38 to bug-fix: its agent starts."
    assert answers[6] == "Commented on #38 (comment 7)."
    triage = next(
        r for r in stack.github.requests if r.method == "POST" and r.url.path.endswith("/38/comments")
    )
    assert (
        _unmarked(json.loads(triage.content)["body"])
        == "[squadron:pm] Triage: a bug; bug-fix takes it after #12."
    )
    assert stack.agent(pm_id).lease_owner is None
    assigned = next(r for r in stack.github.requests if r.url.path.endswith("/38/assignees"))
    assert json.loads(assigned.content) == {"assignees": ["squadron[bot]"]}

    routed = stack.route_queued()
    assert [(r.event, r.action) for r in routed] == [
        ("squadron", "register_blocker"),
        ("squadron", "agent_assigned_issue"),
        ("squadron", "task_ended"),
    ]
    # The label routed the assignment to bug-fix; its agent waits asleep for the blocker.
    dev = stack.agent("1-38-bug-fix")
    assert (dev.branch, dev.status, dev.blocked_by) == ("fix/issue-38", AgentStatus.SLEEPING, frozenset({12}))

    # The next event wakes the idle PM; an ephemeral role starts a fresh session for it.
    stack.route(e.opened(39))
    again = ScriptedModel([ToolCall("check_for_events", {}), Say("Nothing to do.")])
    with serve(again):
        run(stack.host(again, pm_id))
    seen = " ".join(again.contents_seen(0))
    assert "Issue 38" not in seen and "Triaged #38" not in seen
    assert "#39 opened by alice\n  Issue 39" in tool_results(again)[0]


def test_a_pm_lingers_for_news_so_a_burst_is_one_task_not_one_per_event(stack: Stack) -> None:
    e = stack.events
    stack.route(e.opened(38))
    model = ScriptedModel(
        [
            ToolCall("check_for_events", {}),
            ToolCall("report_complete", {"summary": "Triaged #38."}),
            Say("Done."),
            ToolCall("check_for_events", {}),  # after the news that came while it lingered
            ToolCall("report_complete", {"summary": "Triaged #39."}),
            Say("Done again."),
        ]
    )

    def news_while_lingering() -> None:
        deadline = time.monotonic() + 60
        while len(model.requests) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        stack.route(e.opened(39))  # the PM's task still runs: the router only fills its inbox

    with serve(model):
        sender = threading.Thread(target=news_while_lingering)
        sender.start()
        result = run(stack.host(model, "1-pm", linger_seconds=3))
        sender.join()
    assert result.outcome == "idle"
    assert len(stack.launcher.tasks_for("1-pm")) == 1  # one task for both events
    stack.route_queued()
    answers = tool_results(model)  # the last request: the whole batch, one session
    assert "#38 opened by alice" in answers[0] and "#39 opened by alice\n  Issue 39" in answers[2]
    assert stack.registry.pending_inbox("1-pm") == []


def test_each_batch_a_lingering_pm_takes_has_the_roles_whole_budget(tmp_path: Path) -> None:
    # Three batches of three turns: nine in the task, never more than three in one batch.
    config = _with_limits(load_directory(ROOT / ".squadron"), max_turns=4)
    with stack_for(tmp_path, config) as stack:
        e = stack.events
        stack.route(e.opened(38))
        batch: list[Turn] = [
            ToolCall("check_for_events", {}),
            ToolCall("report_complete", {"summary": "Triaged."}),
            Say("Done."),
        ]
        model = ScriptedModel(batch * 3)

        def news_while_lingering() -> None:
            for number, after in ((39, 3), (40, 6)):
                deadline = time.monotonic() + 60
                while len(model.requests) < after and time.monotonic() < deadline:
                    time.sleep(0.05)
                stack.route(e.opened(number))

        published = stack.metrics
        with serve(model):
            sender = threading.Thread(target=news_while_lingering)
            sender.start()
            result = run(stack.host(model, "1-pm", linger_seconds=3))
            sender.join()
        stack.route_queued()
        assert result.outcome == "idle", result.detail  # not escalated: "turns reached 5 of 4"
        assert len(model.requests) == 9 and len(stack.launcher.tasks_for("1-pm")) == 1
        assert stack.agent("1-pm").counters.turns == 9  # the totals still count every batch
        assert totals(published.points)["AgentTurns"] == 9
        assert stack.registry.pending_inbox("1-pm") == []


def test_a_reviewer_reads_the_diff_in_its_checkout_and_posts_its_review_and_status(stack: Stack) -> None:
    head = stack.remote.commit("feat/issue-38", {"app.py": "print('v2')\n"}, "Export API")
    stack.remote.set_ref("refs/pull/101/head", head)
    stack.route(stack.events.assigned(38))
    stack.route(stack.events.pr(101, "feat/issue-38", body="Closes #38"))
    reviewer = "1-101-pr-review"
    assert stack.agent(reviewer).status is AgentStatus.CREATED
    model = ScriptedModel(
        [
            ToolCall("read_pull_request", {}),
            ToolCall("view", {"path": str(stack.work(reviewer) / "app.py")}),
            ToolCall("create", {"path": str(stack.work(reviewer) / "evil.py"), "file_text": "x"}),
            ToolCall("submit_review", {"event": "APPROVE", "body": "Looks right."}),
            ToolCall("post_status", {"state": "success", "description": "Reviewed: approved"}),
            ToolCall("report_complete", {"summary": "Approved.", "outputs": {"verdict": "approve"}}),
            Say("Reviewed."),
        ]
    )
    with serve(model):
        result = run(stack.host(model, reviewer, facts=IssueFacts(head_sha=head)))
    assert result.outcome == "idle"
    answers = tool_results(model)
    assert "--- app.py (modified, +1 -1)" in answers[0] and "+print('v2')" in answers[0]
    assert "print('v2')" in answers[1]  # the reviewer's checkout is the PR's head
    assert "evil.py" not in " ".join(p.name for p in stack.work(reviewer).iterdir())  # no write tools
    review = next(r for r in stack.github.requests if r.url.path.endswith("/pulls/101/reviews"))
    # The PR is the App's own: GitHub refuses a self-approval, so the verdict is a comment-review.
    assert json.loads(review.content)["event"] == "COMMENT"
    assert _unmarked(json.loads(review.content)["body"]).endswith("**Approve**: Looks right.")
    assert "as a comment" in answers[3]
    status = next(r for r in stack.github.requests if "/statuses/" in r.url.path)
    assert json.loads(status.content)["context"] == "squadron/pr-review"
    assert "The pull request's head" in model.contents_seen(0)[-1]
    # The App's own review and status produce no webhook: the gateway that posted them tells the
    # router, from GitHub's answers.
    reported = stack.route_queued()
    assert [(e.event, e.action) for e in reported] == [
        ("squadron", "agent_submitted_review"),
        ("squadron", "agent_posted_status"),
        ("squadron", "task_ended"),
    ]
    ended = reported[-1].command  # what it reported it produced (a pipeline stage's outputs)
    assert isinstance(ended, TaskEnded) and ended.outputs == {"verdict": "approve"}
    assert stack.registry.reviews_of(1, 101)["squadron[bot]"].state == "approved"


def _reviewer_of_pr_101(stack: Stack) -> str:
    """Issue 38 assigned and its pull request 101 opened: the reviewer's id."""
    stack.route(stack.events.assigned(38))
    stack.route(stack.events.pr(101, "feat/issue-38", body="Closes #38"))
    return "1-101-pr-review"


def _reviews_and_leaves_the_news_unread(stack: Stack, reviewer: str) -> ScriptedModel:
    """The reviewer's task, whose model reviews and reports complete but never calls
    check_for_events: its task ends idle, and the host told it of the news once (its last prompt)."""
    model = ScriptedModel(
        [
            ToolCall("post_status", {"state": "success", "description": "Reviewed"}),
            ToolCall("report_complete", {"summary": "Approved."}),
            Say("Reviewed."),
            Say("Already reviewed."),  # the news prompt's turn: it still reads nothing
        ]
    )
    with serve(model):
        result = run(stack.host(model, reviewer, facts=IssueFacts(head_sha=HEAD_SHA)))
    assert result.outcome == "idle"
    prompts = [m for m in model.requests[-1]["messages"] if m.get("role") == "user"]
    assert sum("New events arrived while you worked" in str(m.get("content")) for m in prompts) == 1
    return model


def test_an_agent_that_completes_without_reading_its_inbox_is_told_once_and_its_task_ends(
    stack: Stack,
) -> None:
    """A pipeline stage's instruction waits in the reviewer's inbox; the model does its work and
    reports complete but never calls check_for_events. The host tells it of the news once; the
    model leaves it unread again, and the task ends done (its stage completes), not prompted
    turn after turn until the turns breaker hands it to humans."""
    reviewer = _reviewer_of_pr_101(stack)
    stack.registry.deliver(
        InboxItem(
            agent_id=reviewer,
            delivery_id="pipeline-run-1.review",
            received_at=T0,
            kind="pipeline_stage",
            summary="Pipeline `pr-flow`, stage `review`: work on it, then call report_complete.",
            body="Review the pull request.",
        )
    )
    model = _reviews_and_leaves_the_news_unread(stack, reviewer)
    assert len(model.requests) == 4
    (item,) = stack.registry.pending_inbox(reviewer)  # unread: the next task still finds it
    # The router is told the model was told of it: routing the end wakes nothing (the agent
    # waits for its next event), not a relaunch for the same unread item, task after task.
    (ended,) = [e for e in stack.route_queued() if isinstance(e.command, TaskEnded)]
    assert isinstance(ended.command, TaskEnded) and ended.command.told == [item.key]
    agent = stack.agent(reviewer)
    assert agent.task_arn is None and agent.pending_launch is None


@pytest.mark.parametrize(
    ("waiting", "named"),
    [
        (1, 1),
        (INBOX_PAGE_ITEMS, INBOX_PAGE_ITEMS),
        (INBOX_PAGE_ITEMS + 1, INBOX_PAGE_ITEMS + 1),  # one item past the first page
        (3 * INBOX_PAGE_ITEMS + 5, 3 * INBOX_PAGE_ITEMS + 5),
        # past the bound: its first MAX_TOLD are named, the rest wait for its next task unwoken
        (MAX_TOLD + 7, MAX_TOLD),
    ],
)
def test_news_past_the_inbox_first_page_is_told_once_and_its_task_end_wakes_nothing(
    stack: Stack, waiting: int, named: int
) -> None:
    """More items wait in the reviewer's inbox than its first page holds (the gateway hands 20 at
    once), and the model never reads them. The host tells it of the whole inbox once; its task's
    end names every item it was told of, so routing the end relaunches nothing — not the agent
    woken "for news" on every idle end because the items past the first page went unnamed."""
    reviewer = _reviewer_of_pr_101(stack)
    for n in range(waiting):
        stack.registry.deliver(
            InboxItem(
                agent_id=reviewer,
                delivery_id=f"d-{n:03}",
                received_at=T0 + timedelta(seconds=n),
                kind="comment",
                summary=f"maintainer commented on #101 ({n})",
                body=f"note {n}",
            )
        )
    _reviews_and_leaves_the_news_unread(stack, reviewer)
    pending = stack.registry.pending_inbox(reviewer)
    assert len(pending) == waiting  # unread: the next task finds them all
    (ended,) = [e for e in stack.route_queued() if isinstance(e.command, TaskEnded)]
    agent = stack.agent(reviewer)
    assert (agent.task_arn, agent.pending_launch) == (None, None)  # not relaunched "for news"
    assert isinstance(ended.command, TaskEnded)
    assert ended.command.told == [item.key for item in pending[:named]]


def test_every_documented_framework_tool_is_implemented(stack: Stack) -> None:
    stack.route(stack.events.assigned(38))
    tools = FrameworkTools(
        agent=stack.agent(),
        launch_token="t",
        door=door_of(stack.gateway, stack.launcher, stack.agent()),
        github=GitHubClient(
            http=GitHubHttp(transport=stack.github.transport()),
            token=lambda: "t",
            installation_id=77,
            repo="octo/repo",
            caller=Caller.framework(),
        ),
        writes=GatewayWrites(door_of(stack.gateway, stack.launcher, stack.agent()), Caller.framework()),
        state=HostState(),
        clock=lambda: T0,
    )
    assert set(tools.specs()) == set(FRAMEWORK_TOOLS)


def _escalation_comment(stack: Stack) -> str:
    """The router's comment handing #38 to humans (after routing what the task reported)."""
    stack.route_queued()
    humans = stack.router.github
    assert isinstance(humans, FakeRouterGitHub)
    (body,) = [body for _, number, body, _ in humans.comments if number == 38 and "needs a human" in body]
    return body


def test_too_many_turns_stop_the_turn_in_flight_and_escalate(tmp_path: Path) -> None:
    config = _with_limits(load_directory(ROOT / ".squadron"), max_turns=2)
    with stack_for(tmp_path, config) as stack:
        stack.route(stack.events.assigned(38))
        model = ScriptedModel(
            [ToolCall("read_issue", {}), ToolCall("read_issue", {}), ToolCall("read_issue", {})],
            then=Say("Summary: I kept reading the issue."),
        )
        with serve(model):
            result = run(stack.host(model))
        assert result.outcome == "escalated"
        assert "turns reached 3 of 2" in result.detail
        assert "Summary: I kept reading the issue." in _escalation_comment(stack)
        assert stack.agent().status is AgentStatus.ESCALATED
        assert stack.agent().counters.turns == 2  # usage is kept on the agent (the third never ran)


def test_the_active_time_breaker_aborts_a_slow_model_and_the_heartbeat_renews_the_lease(
    tmp_path: Path,
) -> None:
    config = _with_limits(load_directory(ROOT / ".squadron"), max_active_duration=3600)
    with stack_for(tmp_path, config) as stack:
        stack.route(stack.events.assigned(38))
        model = ScriptedModel(
            [ToolCall("read_issue", {}), Stall(seconds=60)], then=Say("Summary: the model was slow.")
        )
        start = T0 + timedelta(hours=1)

        def clock() -> datetime:
            # Time stands still until the model stalls, then two hours have passed.
            return start + (timedelta(hours=2) if model.stalled.is_set() else timedelta(0))

        beats: list[str] = []
        with serve(model):
            host = stack.host(model, clock=clock, watchdog_seconds=0.05)
            renew = host.door.heartbeat

            def counted() -> str:
                beats.append(renew())
                return beats[-1]

            host.door.heartbeat = counted  # type: ignore[method-assign]
            result = run(host)
        assert result.outcome == "escalated"
        assert "active_duration reached 7200 of 3600" in result.detail
        assert "Summary: the model was slow." in _escalation_comment(stack)
        agent = stack.agent()
        assert (agent.status, agent.lease_owner) == (AgentStatus.ESCALATED, None)
        assert beats and set(beats) == {"ACTIVE"}  # the watchdog renewed the lease through the gateway
        assert agent.counters.active_seconds == 7200


def test_a_finished_agents_state_leaves_with_the_next_task_and_its_restart_starts_from_nothing(
    stack: Stack,
) -> None:
    stack.gateway.state_retention = timedelta(0)  # due as soon as no task of it may run
    e = stack.events
    stack.route(e.assigned(38))
    dirs = AgentDirs(stack.root, A38)
    first = ScriptedModel(
        [
            ToolCall("create", {"path": str(dirs.work / "scratch.py"), "file_text": "x = 1\n"}),
            ToolCall("report_complete", {"summary": "Left a scratch file."}),
            Say("Done."),
        ]
    )
    with serve(first):
        assert run(stack.host(first)).outcome == "idle"
    stack.route_queued()  # its task's end: no task of it runs any more
    assert (dirs.work / "scratch.py").exists() and any(dirs.copilot_home.iterdir())
    assert dirs.framework_clone.is_dir()
    stack.route(e.closed(38))
    assert stack.agent().status is AgentStatus.COMPLETED
    stack.gateway.clock = lambda: T0 + timedelta(hours=2)

    # The next task to start (another agent's) removes 38's directory and clone before its session.
    stack.route(e.assigned(39))
    other = ScriptedModel([ToolCall("report_complete", {"summary": "Nothing to do."}), Say("Ok.")])
    with serve(other):
        host = stack.host(other, "1-39-feat-dev")
        assert run(host).outcome == "idle"
    assert host.swept == Sweep(claimed=(A38,), removed=(A38,), refused=(), recorded=(A38,))
    assert not dirs.agent.exists() and not dirs.framework_clone.exists()
    assert list((stack.root / "trash").iterdir()) == []  # emptied while 39 worked
    assert AgentDirs(stack.root, "1-39-feat-dev").work.is_dir()  # its own untouched
    purged = stack.agent()
    assert (purged.status, purged.purged_at) == (AgentStatus.COMPLETED, T0 + timedelta(hours=2))

    # Reopened and assigned again: a new generation, a new session, a fresh working copy.
    stack.route(e.reopened(38))
    stack.route(e.assigned(38))
    restarted = stack.agent()
    assert (restarted.generation, restarted.purged_at, restarted.finished_at) == (2, None, None)
    again = ScriptedModel([ToolCall("report_complete", {"summary": "Fresh start."}), Say("Ok.")])
    stack.metrics.points.clear()
    with serve(again):
        assert run(stack.host(again)).outcome == "idle"
    assert _dimensions(stack.metrics, "SessionStartSeconds") == [("Mode", "create")]
    assert "Created branch feat/issue-38 from main." in again.contents_seen(0)[-1]
    assert dirs.work.is_dir() and not (dirs.work / "scratch.py").exists()
    assert "Left a scratch file" not in " ".join(again.contents_seen(0))  # nothing of the old session


def test_a_janitors_pass_that_fails_never_fails_the_agents_own_work(stack: Stack) -> None:
    stack.route(stack.events.assigned(38))
    model = ScriptedModel([ToolCall("report_complete", {"summary": "Done anyway."}), Say("Ok.")])

    def refused() -> list[str]:
        raise LaunchRefusedError("forbidden", "the gateway said no")

    trash = stack.root / "trash"
    trash.mkdir(mode=0o700)
    (trash / "left-by-a-task-that-died").mkdir()  # a pass that died after its renames
    with serve(model):
        host = stack.host(model)
        host.door.purge_claim = refused  # type: ignore[method-assign]
        result = run(host)
    assert result.outcome == "idle" and result.detail == "Done anyway."
    assert host.swept is None
    assert list(trash.iterdir()) == []  # the trash is emptied all the same


def test_a_cli_that_dies_while_starting_is_started_again(stack: Stack, tmp_path: Path) -> None:
    """On a loaded machine the CLI was seen to exit (code 1) before answering ``connect``: the
    turn starts it again rather than failing the task. Here it dies on its first two starts."""
    where = tmp_path / "flaky"
    where.mkdir(mode=0o777)
    where.chmod(0o777)  # the CLI runs as the agent's own user
    let_others_pass(where)
    starts = where / "starts"
    flaky = where / "copilot"
    flaky.write_text(
        f'#!/bin/sh\necho started >> {starts}\n[ "$(wc -l < {starts})" -le 2 ] && exit 1\nexec {CLI} "$@"\n',
        encoding="utf-8",
    )
    flaky.chmod(0o755)
    stack.route(stack.events.assigned(38))
    model = ScriptedModel([Say("Nothing to do yet.")])
    with serve(model):
        result = run(stack.host(model, cli_path=flaky))
    assert result.outcome == "idle", tool_results(model)
    assert starts.read_text(encoding="utf-8").count("started") == 3


def test_the_model_gateway_holds_the_key_counts_the_tokens_and_refuses_past_the_issues_budget(
    tmp_path: Path,
) -> None:
    base = load_directory(ROOT / ".squadron")
    # claude-sonnet-4.5 at $3 / $15 a million tokens, the scripted model's 1 in and 1 out a call:
    # $0.000018 a call, so the fourth call would pass $0.00004.
    config = base.model_copy(update={"config": base.config.model_copy(update={"issue_budget_usd": 0.00004})})
    key = "sk-provider-key-the-cli-never-holds"
    with stack_for(tmp_path, config) as stack:
        stack.route(stack.events.assigned(38))
        model = ScriptedModel([ToolCall("check_for_events", {})] * 10)
        with serve(model, key):
            gateway = ModelGateway(
                Upstream("openai", model.base_url, key), models=frozenset({"claude-sonnet-4.5"})
            )
            host = stack.host(model, model_gateway=gateway)
            assert key not in repr(host.provider) + repr(host.runtime.env)
            result = run(host)

        # Three calls reached the model (with the key: the model answers no one else); the fourth
        # was refused before it was sent, and the task ended handed to humans, not failed.
        assert len(model.requests) == 3, result
        assert result.outcome == "escalated" and result.detail.startswith("the issue's budget is spent")
        (ended,) = [e for e in stack.route_queued() if isinstance(e.command, TaskEnded)]
        assert isinstance(ended.command, TaskEnded)
        # What the task used is what the gateway counted (the SDK's reports are not added again).
        assert [(t.model, t.input_tokens, t.output_tokens) for t in ended.command.usage.tokens] == [
            ("claude-sonnet-4.5", 3, 3)
        ]
        # The router's task-end budget check hands it to humans with the issue's figures.
        agent = stack.agent()
        assert agent.status is AgentStatus.ESCALATED
        assert agent.escalation_reason is not None
        assert agent.escalation_reason.startswith(
            "the issue's budget is spent: $0.0001 of its $0.0000 budget"
        )
        humans = stack.router.github
        assert isinstance(humans, FakeRouterGitHub)
        assert [c["title"] for c in humans.created] == ["needs-human: #38 (feat-dev-38)"]


#: What one call of the scripted model costs (1 token in, 1 out, claude-sonnet-4.5 at $3 / $15 a
#: million) with no task time priced.
CALL_USD = 18e-6


def test_two_agents_of_one_issue_share_its_budget_at_the_model_gateway_and_the_refused_one_goes_to_humans(
    tmp_path: Path,
) -> None:
    base = load_directory(ROOT / ".squadron")
    repo = base.config.model_copy(
        update={
            "issue_budget_usd": 0.0001,  # five and a half calls
            "pricing": base.config.pricing.model_copy(update={"task_usd_per_hour": 0.0}),
        }
    )
    config = base.model_copy(update={"config": repo})
    key = "sk-provider-key-the-cli-never-holds"
    reviewer = "1-101-pr-review"
    with stack_for(tmp_path, config) as stack:
        head = stack.remote.commit("feat/issue-38", {"app.py": "print('v2')\n"}, "Export API")
        stack.remote.set_ref("refs/pull/101/head", head)
        stack.route(stack.events.assigned(38))
        stack.route(stack.events.pr(101, "feat/issue-38", body="Closes #38"))

        def gateway(model: ScriptedModel) -> ModelGateway:
            return ModelGateway(
                Upstream("openai", model.base_url, key), models=frozenset({"claude-sonnet-4.5"})
            )

        # The dev's task makes two calls; its end is not routed yet, so for the registry it still
        # runs (its spend is its last report, not its counters).
        dev_model = ScriptedModel([ToolCall("check_for_events", {}), Say("Working on it.")])
        with serve(dev_model, key):
            dev = run(stack.host(dev_model, model_gateway=gateway(dev_model)))
        assert (dev.outcome, len(dev_model.requests)) == ("idle", 2)
        assert stack.agent().counters.tokens == ()

        # The reviewer, at the same time: alone it would make six calls before its own spend
        # reached the budget; with the dev's two counted it makes four, the fifth is refused.
        review_model = ScriptedModel([ToolCall("check_for_events", {})] * 10)
        with serve(review_model, key):
            result = run(
                stack.host(
                    review_model,
                    reviewer,
                    facts=IssueFacts(head_sha=head),
                    model_gateway=gateway(review_model),
                )
            )
        assert len(review_model.requests) == 4, result
        assert result.outcome == "escalated" and "the issue's budget is spent" in result.detail

        stack.route_queued()
        agent = stack.agent(reviewer)
        assert agent.status is AgentStatus.ESCALATED
        assert agent.escalation_reason == "the issue's budget is spent: $0.0001 of its $0.0001 budget"
        assert round(6 * CALL_USD, 6) == 0.000108  # the two agents' six calls, what the issue cost
        humans = stack.router.github
        assert isinstance(humans, FakeRouterGitHub)
        told = [body for _, number, body, _ in humans.comments if number in (38, 101) and "budget" in body]
        assert told and all("$0.0001 of its $0.0001 budget" in body for body in told)


def test_a_lingering_tasks_new_batch_gets_its_model_calls_afresh_but_not_its_budget(stack: Stack) -> None:
    stack.route(stack.events.assigned(38))
    gateway = ModelGateway(Upstream("openai", "http://127.0.0.1:9/v1", "k"), models=frozenset({"m"}))
    host = stack.host(ScriptedModel(), model_gateway=gateway)
    gateway.stop()
    assert gateway.admit("m") == "the agent's task has not begun"  # no call before the lease
    host._cost_before, host.agent_role = Cost(), stack.config.role("feat-dev")
    allowed = host.agent_role.limits.max_turns * CALLS_PER_TURN
    assert [gateway.admit("m") for _ in range(allowed)] == [None] * allowed
    assert "model calls" in str(gateway.admit("m"))  # a shell looping on the gateway
    host._new_batch()  # a lingering PM's next batch of news
    assert gateway.admit("m") is None
    host._cost_before = Cost(tokens_usd=10**6)  # the issue's budget does not start again
    host.config = stack.config.model_copy(
        update={"config": stack.config.config.model_copy(update={"issue_budget_usd": 1.0})}
    )
    assert "budget is spent" in str(gateway.admit("m"))
