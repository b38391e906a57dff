"""Wiring an agent task from its environment (the imperative edge of the agent host)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from squadron.adapters.dynamo_registry import DynamoRegistry
from squadron.adapters.git import GitRemote, WorkingCopy
from squadron.adapters.github.client import GitHubClient
from squadron.adapters.github.for_router import RepositoryFilesOverGitHub
from squadron.adapters.github.http import GitHubHttp
from squadron.adapters.metrics import CloudWatchMetrics
from squadron.adapters.secrets import SecretsManagerSource
from squadron.adapters.sqs import SqsEventQueue
from squadron.adapters.token_client import VendedTokens
from squadron.agent.copilot_runtime import CopilotRuntime
from squadron.agent.host import AgentHost
from squadron.agent.prompts import IssueFacts
from squadron.config import ConfigLoader
from squadron.config.models import ByokProvider
from squadron.domain.agents import AgentRecord, RoleKind
from squadron.domain.permissions import Caller, caller_kind
from squadron.errors import ConfigurationError
from squadron.settings import AgentSettings, load_settings


def agent_caller(agent: AgentRecord) -> Caller:
    return Caller(caller_kind(agent.kind), agent.display_name, agent.role, agent.branch)


def provider_for(provider: Any, secrets: SecretsManagerSource) -> dict[str, Any] | None:
    """The SDK provider config of a role: None for Copilot, the BYOK endpoint and its key otherwise."""
    if not isinstance(provider, ByokProvider):
        return None
    config: dict[str, Any] = {
        "type": provider.provider_type,
        "base_url": provider.base_url,
        "api_key": secrets.get(provider.api_key_secret),
    }
    if provider.azure_api_version:
        config["azure"] = {"api_version": provider.azure_api_version}
    return config


def build_host(
    environ: Mapping[str, str] | None = None,
    *,
    http: GitHubHttp | None = None,
    token: Callable[[], str] | None = None,
) -> AgentHost:
    """The host of the agent this task was launched for, ready to ``run()``.

    ``http`` and ``token`` replace the GitHub transport and the token vendor (tests).
    """
    env = dict(os.environ if environ is None else environ)
    settings = load_settings(AgentSettings, env)
    registry = DynamoRegistry(settings.registry_table_name)
    agent = registry.get_agent(settings.agent_id)
    if agent is None:
        raise ConfigurationError(f"no agent {settings.agent_id} in {settings.registry_table_name}")
    if agent.installation_id is None:
        raise ConfigurationError(f"agent {agent.agent_id} has no installation")
    if token is None:
        token = VendedTokens(
            function=settings.token_vendor_function,
            agent_id=agent.agent_id,
            launch_token=settings.launch_token,
        ).token
    github_http = http or GitHubHttp(base_url=settings.github_api_url)
    task_token = token
    installation = agent.installation_id

    def client(caller: Caller, repo: str = agent.repo_full_name) -> GitHubClient:
        return GitHubClient(
            http=github_http, token=task_token, installation_id=installation, repo=repo, caller=caller
        )

    reader = client(agent_caller(agent))
    config = ConfigLoader(RepositoryFilesOverGitHub(lambda repo: reader)).load(agent.repo_full_name)
    facts = read_facts(reader, agent)
    secrets = SecretsManagerSource()
    role = config.role(agent.role)
    copilot_token: Callable[[], str] | None = None
    provider: dict[str, Any] | None
    if settings.model_url:  # the local stack's model serves every role
        provider = {"type": "openai", "base_url": settings.model_url, "api_key": "local"}
    else:
        provider = provider_for(role.provider, secrets)
        secret_id = settings.copilot_token_secret
        if secret_id and not isinstance(role.provider, ByokProvider):

            def copilot_token_reader() -> str:
                return secrets.get(secret_id)

            copilot_token = copilot_token_reader
    runtime = CopilotRuntime(
        cli_path=settings.copilot_cli_path,
        home=settings.copilot_home,
        # Only PATH and HOME reach the CLI: no AWS credentials, no tokens in its environment.
        env={"PATH": env.get("PATH", "/usr/bin:/bin"), "HOME": env.get("HOME", settings.copilot_home)},
        github_token=copilot_token,
    )
    working_copy = None
    if agent.kind is not RoleKind.PM:
        working_copy = WorkingCopy(
            Path(settings.workspace_root) / agent.agent_id,
            GitRemote(settings.git_remote_template.format(repo=agent.repo_full_name), task_token),
            author_name=f"{agent.display_name} (squadron)",
            author_email=f"{config.config.bot_login}@users.noreply.github.com",
        )
    return AgentHost(
        agent_id=agent.agent_id,
        launch_token=settings.launch_token,
        registry=registry,
        queue=SqsEventQueue(settings.events_queue_url),
        config=config,
        runtime=runtime,
        agent_github=lambda a: client(agent_caller(a)),
        # The task's token is narrowed to its role: escalation writes (label, needs-human issue)
        # go through the framework caller but can only do what that token allows.
        framework_github=lambda a: client(Caller.framework()),
        provider=provider,
        facts=facts,
        timeout_seconds=settings.turn_timeout_seconds,
        working_copy=working_copy,
        linger_seconds=settings.pm_linger_seconds if agent.kind is RoleKind.PM else 0,
        metrics=(
            CloudWatchMetrics(settings.metrics_namespace, "agent") if settings.metrics_namespace else None
        ),
        launch_cause=agent.launch_cause,
        github_traffic=github_http.stats.drain,
    )


def read_facts(reader: GitHubClient, agent: AgentRecord) -> IssueFacts:
    """What the prompts need from GitHub: the issue, the default branch, a reviewer's PR."""
    repository = reader.get_repository()
    issue = reader.get_issue(agent.issue_number) if agent.issue_number is not None else {}
    default_branch = str(repository.get("default_branch") or "main")
    base, head = default_branch, ""
    if agent.kind is RoleKind.REVIEW and agent.pr_number is not None:
        pr = reader.get_pull(agent.pr_number)
        base = str(pr.get("base", {}).get("ref") or default_branch)
        head = str(pr.get("head", {}).get("sha") or "")
    return IssueFacts(
        title=str(issue.get("title") or ""),
        url=str(issue.get("html_url") or ""),
        default_branch=default_branch,
        base_branch=base,
        head_sha=head,
    )
