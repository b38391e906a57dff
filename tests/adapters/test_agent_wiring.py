"""An agent task's wiring: its token from the vendor, its config and issue from GitHub, its model provider."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from squadron.adapters.dynamo_registry import TABLE_DEFINITION, DynamoRegistry
from squadron.adapters.github.http import GitHubHttp
from squadron.adapters.metrics import CloudWatchMetrics
from squadron.adapters.token_client import AgentTokenError, VendedTokens
from squadron.agent.__main__ import configure_logging
from squadron.agent.wiring import build_host
from squadron.domain.events import EventEnvelope
from squadron.domain.routing import RoutingPolicy
from squadron.errors import ConfigurationError
from squadron.shell.router import RouterService
from tests.support import github_fake
from tests.support.events import T0, Events
from tests.support.fake_registry import FakeLauncher, FakeRouterGitHub
from tests.support.github_fake import FakeGitHub

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
A38 = "1-38-feat-dev"


def _answer(body: dict[str, Any], *, error: bool = False) -> dict[str, Any]:
    response: dict[str, Any] = {"StatusCode": 200, "Payload": io.BytesIO(json.dumps(body).encode())}
    if error:
        response["FunctionError"] = "Unhandled"
    return response


def _tokens(answers: list[dict[str, Any]], clock: list[datetime]) -> tuple[VendedTokens, Stubber]:
    client = boto3.client("lambda", region_name="us-east-1")
    stubber = Stubber(client)
    for answer in answers:
        stubber.add_response(
            "invoke",
            answer,
            {
                "FunctionName": "token-vendor",
                "Payload": json.dumps({"agent_id": A38, "launch_token": "tok"}).encode(),
            },
        )
    stubber.activate()
    tokens = VendedTokens(
        function="token-vendor", agent_id=A38, launch_token="tok", client=client, clock=lambda: clock[0]
    )
    return tokens, stubber


def test_tokens_are_asked_once_and_refreshed_before_expiry() -> None:
    clock = [NOW]
    expires = (NOW + timedelta(hours=1)).isoformat()
    tokens, stubber = _tokens(
        [
            _answer({"token": "ghs_a", "expires_at": expires}),
            _answer({"token": "ghs_b", "expires_at": expires}),
        ],
        clock,
    )
    assert tokens.token() == "ghs_a"
    clock[0] = NOW + timedelta(minutes=54)
    assert tokens.token() == "ghs_a"
    clock[0] = NOW + timedelta(minutes=56)
    assert tokens.token() == "ghs_b"
    stubber.assert_no_pending_responses()
    assert "ghs_" not in repr(tokens)


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        (
            _answer({"error": "task tok was replaced by 1-38-feat-dev-g1-l2"}),
            "refused 1-38-feat-dev: task tok was replaced",
        ),
        (_answer({"errorMessage": "boom"}, error=True), "the token vendor token-vendor failed"),
    ],
    ids=["refused", "vendor crashed"],
)
def test_a_refusal_is_a_named_error(answer: dict[str, Any], problem: str) -> None:
    tokens, _ = _tokens([answer], [NOW])
    with pytest.raises(AgentTokenError, match=problem):
        tokens.token()


ENV = {
    "SQUADRON_AGENT_ID": A38,
    "SQUADRON_LAUNCH_TOKEN": f"{A38}-g1-l1",
    "REGISTRY_TABLE_NAME": "registry",
    "EVENTS_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/events.fifo",
    "TOKEN_VENDOR_FUNCTION": "token-vendor",
    "COPILOT_HOME": "/mnt/sessions",
    "COPILOT_CLI_PATH": "/opt/copilot/copilot",
    "PATH": "/usr/bin",
    "AWS_SECRET_ACCESS_KEY": "must-not-reach-the-cli",
}


def _route(registry: DynamoRegistry, event: EventEnvelope) -> None:
    RouterService(
        registry=registry,
        launcher=FakeLauncher(),
        github=FakeRouterGitHub(),
        policies=lambda _e: RoutingPolicy(),
        clock=lambda: T0,
    ).process(event)


@pytest.fixture
def registry() -> Iterator[DynamoRegistry]:
    with mock_aws():
        client = boto3.client("dynamodb")
        client.create_table(TableName="registry", **TABLE_DEFINITION)
        registry = DynamoRegistry("registry", client=client)
        _route(registry, Events(full_name="octo/repo").assigned(38))
        yield registry


def test_an_agent_task_is_wired_from_its_environment(
    registry: DynamoRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeGitHub()
    host = build_host(
        ENV, http=GitHubHttp(transport=fake.transport(), sleep=lambda s: None), token=lambda: "ghs_narrow"
    )
    assert host.agent_id == A38
    assert host.config.config.max_issue_depth == 4  # .squadron/config.yaml from the default branch
    assert (host.facts.title, host.facts.default_branch) == ("Issue 38", "main")
    assert host.provider is None  # the role's model is served by Copilot
    assert host.runtime.env == {"PATH": "/usr/bin", "HOME": "/mnt/sessions"}  # nothing else reaches the CLI
    assert {r.headers["authorization"] for r in fake.requests} == {"Bearer ghs_narrow"}
    wc = host.working_copy
    assert wc is not None
    # The working copy sits next to the sessions (EFS), one directory per agent, and its remote
    # gets the same narrowed token (per git command, never stored).
    assert wc.path == Path("/mnt/sessions/work") / A38
    assert wc.remote.url == "https://github.com/octo/repo.git"
    assert wc.remote.token is not None and wc.remote.token() == "ghs_narrow"
    assert (wc.author_name, wc.author_email) == (
        "feat-dev-38 (squadron)",
        "squadron[bot]@users.noreply.github.com",
    )


def test_a_reviewer_reads_its_pull_requests_base_and_head(registry: DynamoRegistry) -> None:
    _route(registry, Events(full_name="octo/repo").pr(101, "feat/issue-38", body="Closes #38", base="main"))
    env = {**ENV, "SQUADRON_AGENT_ID": "1-101-pr-review", "SQUADRON_LAUNCH_TOKEN": "1-101-pr-review-g1-l1"}
    env["SQUADRON_WORKSPACE"] = "/mnt/sessions/trees"
    host = build_host(env, http=GitHubHttp(transport=FakeGitHub().transport()), token=lambda: "t")
    assert (host.facts.base_branch, host.facts.head_sha) == ("main", "c" * 40)
    assert host.working_copy is not None and host.working_copy.path == Path(
        "/mnt/sessions/trees/1-101-pr-review"
    )


def test_the_pm_has_no_working_copy(registry: DynamoRegistry) -> None:
    _route(registry, Events(full_name="octo/repo").opened(40))
    env = {**ENV, "SQUADRON_AGENT_ID": "1-pm", "SQUADRON_LAUNCH_TOKEN": "1-pm-g1-l1"}
    host = build_host(env, http=GitHubHttp(transport=FakeGitHub().transport()), token=lambda: "t")
    assert host.working_copy is None


def test_metrics_go_to_the_stages_namespace_and_logs_name_the_launch(registry: DynamoRegistry) -> None:
    _route(registry, Events(full_name="octo/repo").assigned(38))
    http = GitHubHttp(transport=FakeGitHub().transport())
    assert build_host(ENV, http=http, token=lambda: "t").metrics is None  # not asked: not published
    host = build_host({**ENV, "SQUADRON_METRICS_NAMESPACE": "Squadron/prod"}, http=http, token=lambda: "t")
    assert isinstance(host.metrics, CloudWatchMetrics)
    assert (host.metrics.namespace, host.metrics.service) == ("Squadron/prod", "agent")
    # Its GitHub traffic is counted from the start (reading the configuration and the issue).
    assert host.github_traffic is not None and host.github_traffic().calls >= 2
    agent = registry.get_agent(A38)
    assert agent is not None and host.launch_cause == agent.launch_cause is not None


def test_agent_logs_are_json_keyed_by_agent_issue_and_launch(capsys: pytest.CaptureFixture[str]) -> None:
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    try:
        formatter = configure_logging(ENV)
        formatter.append_keys(correlation_id="delivery-1")
        logging.getLogger("squadron.agent.host").warning("lease lost")
        (line,) = [json.loads(raw) for raw in capsys.readouterr().out.splitlines() if "lease lost" in raw]
    finally:
        root.handlers[:], _ = saved
        root.setLevel(saved[1])
    assert line["message"] == "lease lost" and line["level"] == "WARNING" and line["service"] == "agent"
    assert (line["agent_id"], line["issue"], line["role"]) == (A38, 38, "feat-dev")
    assert (line["launch"], line["correlation_id"]) == (f"{A38}-g1-l1", "delivery-1")


def test_a_byok_role_gets_its_key_from_the_secret_store(
    registry: DynamoRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    boto3.client("secretsmanager").create_secret(Name="squadron/byok/llm", SecretString="sk-test")
    config = (
        "version: 1\nroles:\n  feat-dev:\n    kind: dev\n    provider:\n      type: byok\n"
        "      provider_type: openai\n      base_url: https://llm.example/v1\n      api_key_secret: squadron/byok/llm\n"
    )
    monkeypatch.setitem(github_fake.FILES, ".squadron/config.yaml", config)
    host = build_host(
        ENV, http=GitHubHttp(transport=FakeGitHub().transport(), sleep=lambda s: None), token=lambda: "t"
    )
    assert host.provider == {"type": "openai", "base_url": "https://llm.example/v1", "api_key": "sk-test"}


def test_a_task_for_an_unknown_agent_stops_with_a_clear_error(registry: DynamoRegistry) -> None:
    with pytest.raises(ConfigurationError, match="no agent 1-39-feat-dev in registry"):
        build_host({**ENV, "SQUADRON_AGENT_ID": "1-39-feat-dev"}, token=lambda: "t")
    with pytest.raises(ConfigurationError, match="TOKEN_VENDOR_FUNCTION is required"):
        build_host({k: v for k, v in ENV.items() if k != "TOKEN_VENDOR_FUNCTION"})
