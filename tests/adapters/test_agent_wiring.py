"""An agent task's wiring: its door to the gateway, its config and issue from GitHub, its model provider,
and the environment of the Copilot CLI it starts (which holds nothing worth stealing)."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from squadron.adapters.confinement import AgentDirs, AgentUser
from squadron.adapters.copilot import ThroughGateway
from squadron.adapters.dynamo_registry import DynamoRegistry
from squadron.adapters.gateway_client import GatewayUnavailableError, LambdaTransport
from squadron.adapters.github.http import GitHubHttp
from squadron.adapters.sqs import SqsEventQueue
from squadron.agent.__main__ import configure_logging
from squadron.agent.door import Door
from squadron.agent.wiring import build_host, upstream_for
from squadron.config import load_directory
from squadron.domain.launches import LaunchRefusedError
from squadron.domain.repo_config.models import ByokProvider
from squadron.errors import ConfigurationError
from squadron.shell.gateway import AgentGateway
from tests.support import github_fake
from tests.support.aws import registry_and_queue
from tests.support.events import T0, Events
from tests.support.fake_registry import FakeLauncher
from tests.support.gateway import ROOT, DictSecrets, gateway_for, in_process
from tests.support.github_fake import FakeGitHub
from tests.support.router_stack import router_over

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
A38 = "1-38-feat-dev"
SECRET = "x" * 43


# --- the door and its transport ---------------------------------------------------------------------


#: What the gateway answers with a token besides it (squadron.domain.gateway_wire.TokenAnswer).
TOKEN_OF = {"repository": "octo/repo", "permissions": {"contents": "read"}}


def test_a_door_reuses_its_token_until_near_expiry_and_never_shows_its_secret() -> None:
    clock = [NOW]
    answers = iter(
        [
            {"token": "ghs_a", "expires_at": (NOW + timedelta(hours=1)).isoformat(), **TOKEN_OF},
            {"token": "ghs_b", "expires_at": (NOW + timedelta(hours=2)).isoformat(), **TOKEN_OF},
        ]
    )
    asked: list[dict[str, Any]] = []

    def transport(request: dict[str, Any]) -> dict[str, Any]:
        asked.append(request)
        return next(answers)

    door = Door(transport, agent_id=A38, launch_token="tok", secret=SECRET, clock=lambda: clock[0])
    assert door.github_token() == "ghs_a"
    clock[0] = NOW + timedelta(minutes=54)
    assert door.github_token() == "ghs_a"
    clock[0] = NOW + timedelta(minutes=56)
    assert door.github_token() == "ghs_b"
    assert [r["op"] for r in asked] == ["github_token", "github_token"]
    assert all(r["secret"] == SECRET and r["agent_id"] == A38 for r in asked)  # every call presents it
    assert SECRET not in repr(door) and "ghs_" not in repr(door)


def test_a_refusal_reaches_the_host_as_its_named_code() -> None:
    door = Door(
        lambda r: {"error": "launch tok of 1-38-feat-dev was replaced", "code": "replaced"},
        agent_id=A38,
        launch_token="tok",
        secret=SECRET,
    )
    with pytest.raises(LaunchRefusedError, match="was replaced") as refused:
        door.begin()
    assert refused.value.code == "replaced"


def _invoked(answer: dict[str, Any], *, error: bool = False) -> dict[str, Any]:
    response: dict[str, Any] = {"StatusCode": 200, "Payload": io.BytesIO(json.dumps(answer).encode())}
    if error:
        response["FunctionError"] = "Unhandled"
    return response


@pytest.mark.parametrize(
    ("response", "answer", "problem"),
    [
        (_invoked({"uid": 1}), {"uid": 1}, None),
        (_invoked({"errorMessage": "boom"}, error=True), None, "the agent gateway gateway failed"),
    ],
    ids=["answered", "gateway crashed"],
)
def test_the_lambda_transport_invokes_the_gateway(
    response: dict[str, Any], answer: dict[str, Any] | None, problem: str | None
) -> None:
    client = boto3.client("lambda", region_name="us-east-1")
    request = {"op": "whoami", "agent_id": A38, "launch_token": "tok", "secret": SECRET}
    with Stubber(client) as stubber:
        stubber.add_response(
            "invoke", response, {"FunctionName": "gateway", "Payload": json.dumps(request).encode()}
        )
        transport = LambdaTransport("gateway", client=client)
        if problem is None:
            assert transport(request) == answer
        else:
            with pytest.raises(GatewayUnavailableError, match=problem):
                transport(request)


# --- the host, wired from its environment ------------------------------------------------------


@dataclass
class World:
    registry: DynamoRegistry
    launcher: FakeLauncher
    gateway: AgentGateway
    secrets: DictSecrets
    root: Path

    def env(self, agent_id: str = A38, **more: str) -> dict[str, str]:
        agent = self.registry.get_agent(agent_id)
        assert agent is not None
        return {
            "SQUADRON_AGENT_ID": agent_id,
            "SQUADRON_LAUNCH_TOKEN": agent.launch_token,
            "SQUADRON_LAUNCH_SECRET": self.launcher.secrets[agent.launch_token],
            "AGENT_GATEWAY_FUNCTION": "gateway",
            "SQUADRON_AGENTS_ROOT": str(self.root),
            "COPILOT_CLI_PATH": "/opt/copilot/copilot",
            "XDG_CACHE_HOME": "/opt/copilot-cache",
            "PATH": "/usr/bin",
            "AWS_SECRET_ACCESS_KEY": "must-not-reach-the-cli",
            **more,
        }

    def host(self, env: dict[str, str]) -> Any:
        return build_host(
            env,
            http=GitHubHttp(transport=FakeGitHub().transport(), sleep=lambda s: None),
            transport=in_process(self.gateway),
        )


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    with mock_aws():
        registry, sqs, url = registry_and_queue()
        launcher = FakeLauncher()
        router = router_over(registry, launcher)  # alice assigns the App
        events = Events(full_name="octo/repo")
        for event in (
            events.assigned(38),
            events.pr(101, "feat/issue-38", body="Closes #38", base="main"),
            events.opened(40),
        ):
            router.process(event)
        secrets = DictSecrets({"squadron/byok/llm": "sk-test", "copilot": "gho_seat"})
        gateway = gateway_for(
            registry,
            SqsEventQueue(url, client=sqs),
            FakeGitHub(),
            clock=lambda: T0,
            secrets=secrets,
            copilot_token_secret="copilot",
        )
        yield World(registry, launcher, gateway, secrets, tmp_path / "agents")


def test_an_agent_task_is_wired_from_its_environment(world: World) -> None:
    host = world.host(world.env())
    assert host.agent_id == A38
    assert host.config.config.max_issue_depth == 4  # .squadron/config.yaml from the default branch
    assert (host.facts.title, host.facts.default_branch) == ("Issue 38", "main")
    assert host.provider is None and host.runtime.github_token is not None  # Copilot serves the role
    # The seat's token (the key its role names, from the gateway) stays in the task's model gateway:
    # the CLI's GitHub token is the launch's, its model calls and its token check go through the host.
    gateway = host.model_gateway
    assert gateway is not None and "gho_seat" not in repr(gateway)
    assert host.runtime.github_token() == gateway.token != "gho_seat"
    assert isinstance(host.runtime.request_handler, ThroughGateway)
    assert host.runtime.request_handler.gateway_url == gateway.url
    # Nothing else reaches the CLI: no AWS credentials, no launch secret, no GitHub or Copilot token.
    assert host.runtime.env == {
        "PATH": "/usr/bin",
        "HOME": str(world.root),
        "XDG_CACHE_HOME": "/opt/copilot-cache",
        "COPILOT_DEBUG_GITHUB_API_URL": gateway.github_url,
    }
    gateway.stop()
    dirs = AgentDirs(world.root, A38)
    assert host.workspace is not None
    wc = host.workspace(AgentUser(), dirs)
    assert (wc.path, wc.clone.path) == (dirs.work, dirs.framework_clone)
    assert wc.clone.remote.url == "https://github.com/octo/repo.git"
    assert (wc.author_name, wc.author_email) == (
        "feat-dev-38 (squadron)",
        "squadron[bot]@users.noreply.github.com",
    )
    assert (
        host.launch_cause is not None and host.github_traffic is not None and host.github_traffic().calls >= 2
    )


def test_a_reviewer_reads_its_pull_requests_base_and_head(world: World) -> None:
    host = world.host(world.env("1-101-pr-review"))
    assert (host.facts.base_branch, host.facts.head_sha) == ("main", "c" * 40)
    assert host.workspace is not None


def test_the_pm_has_no_working_copy(world: World) -> None:
    assert world.host(world.env("1-pm")).workspace is None


BYOK_CONFIG = (
    "version: 1\nroles:\n  feat-dev:\n    kind: dev\n    provider:\n      type: byok\n"
    "      provider_type: openai\n      base_url: https://llm.example/v1\n      api_key_secret: squadron/byok/llm\n"
)


def test_a_byok_role_gets_the_key_its_role_names_through_the_gateway(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(github_fake.FILES, ".squadron/config.yaml", BYOK_CONFIG)
    config = load_directory(ROOT / ".squadron")
    roles = dict(config.config.roles)
    dev = roles["feat-dev"]
    assert dev is not None
    provider = ByokProvider(
        type="byok",
        provider_type="openai",
        base_url="https://llm.example/v1",
        api_key_secret="squadron/byok/llm",
    )
    roles["feat-dev"] = dev.model_copy(update={"provider": provider})
    byok = config.model_copy(update={"config": config.config.model_copy(update={"roles": roles})})
    world.gateway.config_for = lambda agent: byok
    host = world.host(world.env())
    # The CLI's provider is the task's model gateway with a launch-scoped token; the key stays in
    # the gateway (the host's memory), in no provider config, environment or argument of the CLI.
    assert host.provider is not None and host.model_gateway is not None
    assert host.provider == {
        "type": "openai",
        "base_url": host.model_gateway.url,
        "api_key": host.model_gateway.token,
    }
    assert host.provider["base_url"].startswith("http://127.0.0.1:")
    assert "sk-test" not in repr(host.provider) + repr(host.runtime.env) + repr(host.model_gateway)
    assert host.runtime.github_token is None
    assert world.secrets.asked == ["squadron/byok/llm"]  # that key, and no other
    host.model_gateway.stop()
    with pytest.raises(ConfigurationError, match="no key for the BYOK provider"):
        upstream_for(provider, None)


def test_a_task_the_gateway_does_not_know_ends_before_it_begins(world: World) -> None:
    with pytest.raises(LaunchRefusedError) as refused:
        world.host({**world.env(), "SQUADRON_LAUNCH_SECRET": "y" * 43})
    assert refused.value.code == "wrong_secret"
    with pytest.raises(ConfigurationError, match="AGENT_GATEWAY_FUNCTION is required"):
        build_host({k: v for k, v in world.env().items() if k != "AGENT_GATEWAY_FUNCTION"})
    with pytest.raises(ConfigurationError) as missing:
        build_host({k: v for k, v in world.env().items() if k != "SQUADRON_LAUNCH_SECRET"})
    assert "SQUADRON_LAUNCH_SECRET is required" in str(missing.value)


def test_a_bad_secret_value_is_never_echoed_in_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError) as problem:
        build_host({"SQUADRON_LAUNCH_SECRET": "short-secret!", "SQUADRON_AGENT_ID": A38})
    assert "short-secret!" not in str(problem.value)


def test_agent_logs_are_json_keyed_by_agent_issue_and_launch(capsys: pytest.CaptureFixture[str]) -> None:
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    env = {
        "SQUADRON_AGENT_ID": A38,
        "SQUADRON_LAUNCH_TOKEN": f"{A38}-g1-l1",
        "SQUADRON_LAUNCH_SECRET": SECRET,
    }
    try:
        formatter = configure_logging(env)
        formatter.append_keys(correlation_id="delivery-1")
        logging.getLogger("squadron.agent.host").warning("lease lost")
        (line,) = [json.loads(raw) for raw in capsys.readouterr().out.splitlines() if "lease lost" in raw]
    finally:
        root.handlers[:], _ = saved
        root.setLevel(saved[1])
    assert line["message"] == "lease lost" and line["level"] == "WARNING" and line["service"] == "agent"
    assert (line["agent_id"], line["issue"], line["role"]) == (A38, 38, "feat-dev")
    assert (line["launch"], line["correlation_id"]) == (f"{A38}-g1-l1", "delivery-1")
    assert SECRET not in json.dumps(line)


def test_an_agent_acts_as_the_deployed_apps_login_whatever_its_slug(world: World) -> None:
    world.gateway.bot_login = "acme-bot[bot]"
    host = world.host(world.env())
    # Its assignments, its own-PR check and its commits name the App the stack runs as.
    assert host.config.config.bot_login == "acme-bot[bot]"
    assert host.workspace is not None
    wc = host.workspace(AgentUser(), AgentDirs(world.root, A38))
    assert wc.author_email == "acme-bot[bot]@users.noreply.github.com"
