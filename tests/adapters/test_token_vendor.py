"""Token vending: only the agent's current task, holding its lease, gets a narrowed token."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import timedelta

import boto3
import pytest
from moto import mock_aws

from squadron.adapters.dynamo_registry import TABLE_DEFINITION, DynamoRegistry
from squadron.adapters.github.auth import GitHubApp
from squadron.adapters.github.http import GitHubHttp
from squadron.domain.agents import AgentStatus
from squadron.domain.effects import AgentWrite
from squadron.domain.routing import RoutingPolicy
from squadron.errors import ConfigurationError
from squadron.shell.router import RouterService
from squadron.shell.tokens import TokenRefusedError, TokenRequest, TokenVendor
from squadron.shell.wiring import build_token_vendor
from tests.support.events import T0, Events
from tests.support.fake_registry import FakeLauncher, FakeRouterGitHub
from tests.support.github_fake import FakeGitHub, app_private_key
from tests.support.lambdas import FakeLambdaContext, load_handler

A38 = "1-38-feat-dev"
NOW = T0 + timedelta(hours=1)


@pytest.fixture
def world() -> Iterator[tuple[DynamoRegistry, TokenVendor, FakeGitHub, Events]]:
    with mock_aws():
        client = boto3.client("dynamodb")
        client.create_table(TableName="registry", **TABLE_DEFINITION)
        registry = DynamoRegistry("registry", client=client)
        github = FakeGitHub()
        private, _ = app_private_key()
        app = GitHubApp(
            app_id=42,
            http=GitHubHttp(transport=github.transport(), sleep=lambda s: None),
            private_key=lambda: private,
            clock=lambda: NOW,
        )
        events = Events(full_name="octo/repo")
        router = RouterService(
            registry=registry,
            launcher=FakeLauncher(),
            github=FakeRouterGitHub(),
            policies=lambda _e: RoutingPolicy(),
            clock=lambda: NOW,
        )
        router.process(events.assigned(38))
        router.process(events.pr(101, "feat/issue-38", "Fixes #38"))
        yield registry, TokenVendor(registry=registry, app=app, clock=lambda: NOW), github, events


def _lease(registry: DynamoRegistry, agent_id: str, owner: str, minutes: int = 15) -> None:
    registry.acquire_lease(agent_id, owner, NOW, timedelta(minutes=minutes))


@pytest.mark.parametrize(
    "lease",
    [None, "own", "expired other"],
    ids=["before taking the lease", "holding it", "after another's expired"],
)
def test_the_current_task_gets_a_token(
    world: tuple[DynamoRegistry, TokenVendor, FakeGitHub, Events], lease: str | None
) -> None:
    registry, vendor, _, _ = world
    if lease == "own":
        _lease(registry, A38, f"{A38}-g1-l1")
    elif lease == "expired other":
        registry.acquire_lease(A38, "old-task", NOW - timedelta(hours=1), timedelta(minutes=5))
    assert vendor.vend(TokenRequest(agent_id=A38, launch_token=f"{A38}-g1-l1")).token == "ghs_77"


@pytest.mark.parametrize(
    ("agent_id", "token", "permissions"),
    [
        (
            A38,
            f"{A38}-g1-l1",
            {"contents": "write", "pull_requests": "write", "issues": "write", "metadata": "read"},
        ),
        (
            "1-101-pr-review",
            "1-101-pr-review-g1-l1",
            {
                "contents": "read",
                "pull_requests": "write",
                "statuses": "write",
                "issues": "read",
                "metadata": "read",
            },
        ),
    ],
    ids=["dev", "review"],
)
def test_tokens_are_narrowed_to_repo_and_role(
    world: tuple[DynamoRegistry, TokenVendor, FakeGitHub, Events],
    agent_id: str,
    token: str,
    permissions: dict[str, str],
) -> None:
    registry, vendor, github, _ = world
    _lease(registry, agent_id, token)
    vended = vendor.vend(TokenRequest(agent_id=agent_id, launch_token=token))
    assert vended.token == "ghs_77"
    assert vended.permissions == permissions
    (request,) = [r for r in github.requests if r.url.path.endswith("/access_tokens")]
    assert json.loads(request.content) == {
        "repositories": ["repo"],
        "permissions": dict(sorted(permissions.items())),
    }
    assert "ghs_77" not in repr(vended)


Setup = Callable[[DynamoRegistry], None]


def _terminal(registry: DynamoRegistry) -> None:
    agent = registry.get_agent(A38)
    assert agent is not None
    registry.put_agent(AgentWrite(agent.transition(AgentStatus.CANCELLED, now=NOW), agent.version))


@pytest.mark.parametrize(
    ("agent_id", "token", "setup", "problem"),
    [
        ("1-39-feat-dev", "1-39-feat-dev-g1-l1", lambda r: None, "no agent 1-39-feat-dev"),
        (
            A38,
            f"{A38}-g1-l0",
            lambda r: _lease(r, A38, f"{A38}-g1-l0"),
            "was replaced by 1-38-feat-dev-g1-l1",
        ),
        (A38, f"{A38}-g1-l1", lambda r: _lease(r, A38, "someone-else"), "is held by someone-else"),
        (A38, f"{A38}-g1-l1", _terminal, "is CANCELLED"),
    ],
    ids=["unknown agent", "replaced task", "another holder", "ended agent"],
)
def test_everyone_else_is_refused(
    world: tuple[DynamoRegistry, TokenVendor, FakeGitHub, Events],
    agent_id: str,
    token: str,
    setup: Setup,
    problem: str,
) -> None:
    registry, vendor, github, _ = world
    setup(registry)
    with pytest.raises(TokenRefusedError, match=problem):
        vendor.vend(TokenRequest(agent_id=agent_id, launch_token=token))
    assert not [r for r in github.requests if r.url.path.endswith("/access_tokens")]


handler_module = load_handler("tokens")


@pytest.mark.parametrize(
    ("event", "answer"),
    [
        ({"agent_id": A38, "launch_token": f"{A38}-g1-l1"}, {"repository": "octo/repo", "token": "ghs_77"}),
        (
            {"agent_id": A38, "launch_token": f"{A38}-g1-l0"},
            {"error": "task 1-38-feat-dev-g1-l0 was replaced by 1-38-feat-dev-g1-l1"},
        ),
        ({"agent_id": A38}, {"error": "invalid request: launch_token: Field required"}),
        (
            {"agent_id": A38, "launch_token": "t", "admin": True},
            {"error": "invalid request: admin: Extra inputs are not permitted"},
        ),
    ],
    ids=["vended", "refused", "missing field", "unknown field"],
)
def test_the_lambda_answers_with_a_token_or_the_reason(
    world: tuple[DynamoRegistry, TokenVendor, FakeGitHub, Events],
    monkeypatch: pytest.MonkeyPatch,
    event: dict[str, object],
    answer: dict[str, str],
) -> None:
    registry, vendor, _, _ = world
    _lease(registry, A38, f"{A38}-g1-l1")
    monkeypatch.setattr(handler_module, "vendor", lambda: vendor)
    result = handler_module.handler(event, FakeLambdaContext())
    assert {k: result[k] for k in answer} == answer


def test_the_vendor_is_wired_from_its_environment() -> None:
    vendor = build_token_vendor(
        {"REGISTRY_TABLE_NAME": "registry", "GITHUB_APP_ID": "5", "GITHUB_PRIVATE_KEY_SECRET_ARN": "arn:key"}
    )
    assert isinstance(vendor.registry, DynamoRegistry)
    with pytest.raises(ConfigurationError, match="GITHUB_APP_ID is required"):
        build_token_vendor({"REGISTRY_TABLE_NAME": "registry", "GITHUB_PRIVATE_KEY_SECRET_ARN": "arn:key"})
