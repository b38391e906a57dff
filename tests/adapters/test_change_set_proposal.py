"""The PM proposes a change set with its framework tool, through the agent gateway's real path:
the tool, the task's door, the gateway (in process, as the Lambda serves it) on DynamoDB (moto),
GitHub the sandbox (three repositories of one installation and one it does not cover). Played by
the attacker too: a dev agent's tool and a hijacked task calling the gateway itself, a stranger's
issue, a repository outside the installation, a request naming another origin. Asserted on what
each got: the stored sets, the plan's artifact, the comments on GitHub.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from moto import mock_aws

from squadron.adapters.dynamo_registry import DynamoRegistry
from squadron.adapters.github.client import GitHubClient
from squadron.adapters.github.for_router import AppGitHub
from squadron.adapters.sqs import SqsEventQueue
from squadron.agent.door import Door
from squadron.agent.tools import FrameworkTools, HostState
from squadron.agent.writes import GatewayWrites
from squadron.domain.agents import AgentRecord
from squadron.domain.change_sets import SetState
from squadron.domain.launches import LaunchRefusedError
from squadron.domain.permissions import agent_caller
from squadron.local.sandbox import GitHubSandbox
from squadron.local.sandbox.base import ApiFault
from squadron.shell.change_sets import ChangeSetDesk
from squadron.shell.gateway import AgentGateway
from tests.support.aws import registry_and_queue
from tests.support.events import T0, Events
from tests.support.fake_memory import FakeMemory
from tests.support.fake_registry import FakeLauncher
from tests.support.gateway import door_of, gateway_for, in_process
from tests.support.router_stack import router_over
from tests.support.sandbox_app import app_of

ORIGIN, SERVER, CLIENT, OUTSIDE = "octo/schema", "octo/server", "octo/client", "octo/elsewhere"
NOW = T0 + timedelta(hours=1)
PLAN = "1. the schema gains `total`\n2. the server fills it\n3. the client shows it"


@dataclass
class World:
    sandbox: GitHubSandbox
    registry: DynamoRegistry
    gateway: AgentGateway
    launcher: FakeLauncher
    memory: FakeMemory
    events: Events

    def agent(self, agent_id: str) -> AgentRecord:
        found = self.registry.get_agent(agent_id)
        assert found is not None
        return found

    def door(self, agent_id: str) -> Door:
        door = door_of(self.gateway, self.launcher, self.agent(agent_id))
        door.begin()
        return door

    def tools(self, agent_id: str) -> dict[str, Any]:
        """The agent's framework tools as its session has them (guarded), over its own door."""
        agent, door = self.agent(agent_id), self.door(agent_id)
        github = GitHubClient(
            http=self.gateway.app.http,
            token=lambda: self.gateway.app.installation_token(77).token,
            installation_id=77,
            repo=ORIGIN,
            caller=agent_caller(agent),
        )
        tools = FrameworkTools(
            agent=agent,
            launch_token=agent.launch_token or "",
            door=door,
            github=github,
            writes=GatewayWrites(door, github.caller),
            state=HostState(),
            clock=lambda: NOW,
        )
        return dict(tools.specs())

    def comments(self, issue: int = 1) -> list[str]:
        return [str(c["body"]) for c in self.sandbox.repos[ORIGIN].comments.get(issue, [])]


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    sandbox = GitHubSandbox(tmp_path, installation_id=77, webhook_secret="s")
    for repo in (ORIGIN, SERVER, CLIENT, OUTSIDE):
        sandbox.add_repository(repo, {"README.md": f"# {repo}\n"}, permissions={"alice": "admin"})
    sandbox.repos[OUTSIDE].installed = False
    sandbox.start()
    for _ in range(2):  # #1 (a writer's) and #2 (a stranger's) of the origin
        answer = httpx.post(
            f"{sandbox.base_url}/repos/{ORIGIN}/issues",
            json={"title": "one change"},
            headers={"authorization": "token human:alice"},
        )
        assert answer.status_code == 201, answer.text
    app = app_of(sandbox)
    with mock_aws():
        registry, sqs, url = registry_and_queue()
        launcher, memory = FakeLauncher(), FakeMemory()
        gateway = gateway_for(
            registry, SqsEventQueue(url, client=sqs), None, app=app, clock=lambda: NOW, memory=memory
        )
        gateway.bot_login = sandbox.bot_login
        gateway.change_sets = ChangeSetDesk(
            registry, AppGitHub(app, bot_login=sandbox.bot_login), clock=lambda: NOW
        )
        router = router_over(registry, launcher, clock=lambda: NOW)
        events = Events(repo_id=sandbox.repos[ORIGIN].id, full_name=ORIGIN, installation_id=77)
        for event in (events.assigned(1), events.opened(2, by="mallory")):  # a dev on #1, and the PM
            router.process(event)
        yield World(sandbox, registry, gateway, launcher, memory, events)
    sandbox.stop()


def _pm(world: World) -> str:
    return f"{world.events.repo_id}-pm"


def _dev(world: World) -> str:
    return f"{world.events.repo_id}-1-feat-dev"


ARGUMENTS = {
    "issue": 1,
    "repositories": [SERVER, CLIENT],
    "dependencies": [{"repository": SERVER, "needs": ORIGIN}, {"repository": CLIENT, "needs": SERVER}],
    "plan": PLAN,
}


def _call(tools: dict[str, Any], name: str, arguments: dict[str, Any]) -> str:
    spec = tools[name]
    return str(spec.handler(spec.params.model_validate(arguments)))


def test_the_pms_tool_proposes_the_set_keeps_its_plan_and_posts_the_proposal_once(world: World) -> None:
    tools = world.tools(_pm(world))

    said = _call(tools, "propose_change_set", ARGUMENTS)
    again = _call(tools, "propose_change_set", {**ARGUMENTS, "repositories": [CLIENT, SERVER.upper()]})

    [stored] = world.registry.change_sets()
    assert said == again  # the same call (any order, any case): the same set
    assert stored.state is SetState.PROPOSED and stored.proposed_by == _pm(world)
    assert (stored.origin_repository, stored.issue, stored.installation_id) == (ORIGIN, 1, 77)
    assert [m.repository for m in stored.members] == [ORIGIN, SERVER, CLIENT]
    assert f"Proposed change set {stored.id}" in said
    assert f"`/squadron change-set approve {stored.id}`" in said
    [kept] = [a for a in world.memory.artifacts(world.events.repo_id) if a.name == stored.id]
    assert (kept.content, kept.issue_number, kept.producer) == (PLAN, 1, _pm(world))
    [proposal] = world.comments()  # one comment, the App's
    assert f"/squadron change-set approve {stored.id}" in proposal
    assert "Merge order (all or nothing): `octo/schema` -> `octo/server` -> `octo/client`." in proposal
    assert world.sandbox.repos[ORIGIN].comments[1][0]["user"]["login"] == world.sandbox.bot_login


REFUSED = [
    (
        "a repository the installation does not cover",
        {"repositories": [SERVER, OUTSIDE]},
        "octo/elsewhere is not a repository of installation 77",
    ),
    ("a stranger's issue", {"issue": 2}, "no one with write access vouched for #2"),
    (
        "a dependency cycle",
        {"dependencies": [{"repository": SERVER, "needs": CLIENT}, {"repository": CLIENT, "needs": SERVER}]},
        "form a cycle",
    ),
    (
        "a dependency outside the set",
        {"dependencies": [{"repository": SERVER, "needs": "evil/fork"}]},
        "which is not in the set",
    ),
]


@pytest.mark.parametrize(("case", "change", "reason"), REFUSED, ids=[r[0] for r in REFUSED])
def test_a_refused_proposal_says_why_and_leaves_nothing(
    world: World, case: str, change: dict[str, Any], reason: str
) -> None:
    said = _call(world.tools(_pm(world)), "propose_change_set", {**ARGUMENTS, **change})

    assert said.startswith("denied: ") and reason in said
    assert world.registry.change_sets() == []
    assert world.comments(1) == [] and world.comments(2) == []
    assert world.memory.artifacts(world.events.repo_id) == []


def test_a_dev_agent_is_refused_by_its_tool_and_by_the_gateway(world: World) -> None:
    said = _call(world.tools(_dev(world)), "propose_change_set", ARGUMENTS)
    assert said.startswith("denied: ") and "may not propose_change_set" in said

    # A hijacked dev task's shell calls the gateway itself.
    door = world.door(_dev(world))
    with pytest.raises(LaunchRefusedError, match="may not propose_change_set") as refused:
        door.propose_change_set(1, [SERVER], [], PLAN)
    assert refused.value.code == "forbidden"
    assert world.registry.change_sets() == [] and world.comments() == []


def test_a_request_cannot_name_its_origin_or_installation(world: World) -> None:
    """The origin is the verified agent's repository: a request naming another is refused whole."""
    pm = world.agent(_pm(world))
    secret = world.launcher.secrets[pm.launch_token or ""]
    request = {
        "op": "propose_change_set",
        "agent_id": pm.agent_id,
        "launch_token": pm.launch_token,
        "secret": secret,
        "issue_number": 1,
        "repositories": [SERVER],
        "plan": PLAN,
    }
    world.door(_pm(world))  # its lease taken
    for extra in ({"origin": "evil/fork"}, {"installation_id": 78}):
        answer = in_process(world.gateway)({**request, **extra})
        assert answer["code"] == "invalid_request" and "Extra inputs are not permitted" in answer["error"]
    assert world.registry.change_sets() == []


@pytest.mark.parametrize("fault", ["502", "refuse"], ids=["applied, then 502", "refused, nothing applied"])
def test_a_proposal_whose_comment_failed_is_posted_once_by_the_same_call_again(
    world: World, fault: ApiFault
) -> None:
    """GitHub applies the proposal comment and answers 502 (found by its key, not posted again), or
    refuses it (the set is stored, the model hears GitHub refused): the same call again makes the
    same set and leaves one proposal comment."""
    tools = world.tools(_pm(world))
    comments = f"/repos/{ORIGIN}/issues/1/comments"
    world.sandbox.api_fault = lambda method, path: fault if (method, path) == ("POST", comments) else None
    first = _call(tools, "propose_change_set", ARGUMENTS)
    world.sandbox.api_fault = None
    again = _call(tools, "propose_change_set", ARGUMENTS)

    [stored] = world.registry.change_sets()
    if fault == "refuse":
        assert first.startswith("GitHub refused: ") and f"change set {stored.id} is stored" in first
    else:
        assert first == again
    assert f"Proposed change set {stored.id}" in again
    [proposal] = world.comments()
    assert f"/squadron change-set approve {stored.id}" in proposal
