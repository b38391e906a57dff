"""Wiring an agent task from its environment (the imperative edge of the agent host)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from squadron.adapters.confinement import AgentDirs, AgentUser
from squadron.adapters.copilot import CopilotRuntime, ThroughGateway
from squadron.adapters.gateway_client import LambdaTransport
from squadron.adapters.git import FrameworkClone, GitRemote, WorkingCopy
from squadron.adapters.github.client import GitHubClient
from squadron.adapters.github.for_router import RepositoryFilesOverGitHub
from squadron.adapters.github.http import GitHubHttp
from squadron.adapters.model_gateway import ModelGateway, Upstream
from squadron.agent.door import Door, Transport
from squadron.agent.host import AgentHost
from squadron.agent.prompts import IssueFacts
from squadron.agent.reading import authors, prompt_title
from squadron.config import ConfigLoader
from squadron.domain.agents import AgentRecord, RoleKind
from squadron.domain.permissions import Caller, agent_caller
from squadron.domain.repo_config.models import ByokProvider
from squadron.errors import ConfigurationError
from squadron.settings import AgentSettings, load_settings


def upstream_for(provider: Any, key: str | None) -> Upstream | None:
    """The provider a role's model gateway forwards to: None for Copilot, the BYOK endpoint and its key
    otherwise."""
    if not isinstance(provider, ByokProvider):
        return None
    if not key:
        raise ConfigurationError(f"no key for the BYOK provider {provider.base_url}")
    return Upstream(provider.provider_type, provider.base_url, key, provider.azure_api_version)


def copilot_route(
    gateway: ModelGateway | None, cli_env: dict[str, str]
) -> tuple[dict[str, Any] | None, tuple[Callable[[], str], ThroughGateway] | None]:
    """How the CLI reaches its model through ``gateway``: a BYOK provider (the gateway's URL and launch
    token), or, for Copilot's API, the launch token as its GitHub token, its model-layer requests
    handed to the host (:class:`ThroughGateway`) and ``cli_env`` pointing its one GitHub API call (the
    token's check) at the gateway. The Copilot token itself stays in the gateway."""
    if gateway is None:
        return None, None
    if not gateway.reads:
        return gateway.provider(), None
    url = gateway.start()
    cli_env["COPILOT_DEBUG_GITHUB_API_URL"] = gateway.github_url
    token = gateway.token
    return None, (lambda: token, ThroughGateway(url))


def build_host(
    environ: Mapping[str, str] | None = None,
    *,
    http: GitHubHttp | None = None,
    transport: Transport | None = None,
    separate_users: bool | None = None,
) -> AgentHost:
    """The host of the agent this task was launched for, ready to ``run()``.

    ``http`` and ``transport`` replace the GitHub transport and the way to the agent gateway
    (tests). Raises LaunchRefusedError when the gateway does not know this launch any more.
    """
    env = dict(os.environ if environ is None else environ)
    settings = load_settings(AgentSettings, env)
    door = Door(
        transport or LambdaTransport(settings.gateway_function),
        agent_id=settings.agent_id,
        launch_token=settings.launch_token,
        secret=settings.launch_secret.get_secret_value(),
    )
    agent = door.whoami()
    if agent.installation_id is None:
        raise ConfigurationError(f"agent {agent.agent_id} has no installation")
    github_http = http or GitHubHttp(base_url=settings.github_api_url)
    installation = agent.installation_id

    def client(caller: Caller, repo: str = agent.repo_full_name) -> GitHubClient:
        return GitHubClient(
            http=github_http, token=door.github_token, installation_id=installation, repo=repo, caller=caller
        )

    reader = client(agent_caller(agent))
    # The deployed App's login wins over a repository's bot_login (assignments, its own reviews).
    config = ConfigLoader(RepositoryFilesOverGitHub(lambda repo: reader), bot_login=door.bot_login).load(
        agent.repo_full_name
    )
    facts = read_facts(reader, agent, config.config.bot_login)
    role = config.role(agent.role)
    upstream: Upstream | None
    if settings.model_url:  # the local stack's model serves every role
        local_key = settings.model_key.get_secret_value() if settings.model_key else "local"
        upstream = Upstream("openai", settings.model_url, local_key)
    else:
        kind, key = door.model_key()
        upstream = upstream_for(role.provider, key if kind == "byok" else None)
        if kind == "copilot" and key:
            upstream = Upstream(
                "copilot", settings.copilot_api_url, key, github_api_url=settings.copilot_github_api_url
            )
    # The key stays in this process: the CLI's provider is the task's model gateway, with a token
    # worth nothing outside this launch (the host stops the gateway when the task ends).
    model_gateway = ModelGateway(upstream, models=frozenset({role.model})) if upstream is not None else None
    cli_env = {"PATH": env.get("PATH", "/usr/bin:/bin"), "HOME": settings.agents_root}
    if settings.copilot_cache:
        cli_env["XDG_CACHE_HOME"] = settings.copilot_cache
    provider, copilot = copilot_route(model_gateway, cli_env)
    runtime = CopilotRuntime(
        cli_path=settings.copilot_cli_path,
        home=settings.agents_root,  # replaced by the agent's own directory when it begins
        # PATH, HOME and the CLI's package cache: no AWS credentials, no tokens, no launch secret.
        env=cli_env,
        github_token=copilot[0] if copilot is not None else None,
        request_handler=copilot[1] if copilot is not None else None,
    )
    remote_url = settings.git_remote_template.format(repo=agent.repo_full_name)
    author = (f"{agent.display_name} (squadron)", f"{config.config.bot_login}@users.noreply.github.com")

    def workspace(user: AgentUser, dirs: AgentDirs) -> WorkingCopy:
        return WorkingCopy(
            dirs.work,
            FrameworkClone(
                dirs.framework_clone,
                GitRemote(remote_url, token=door.github_token, push_token=door.push_token),
            ),
            author_name=author[0],
            author_email=author[1],
            user=user,
            home=dirs.home,
            transfers=dirs.transfers,
        )

    return AgentHost(
        door=door,
        config=config,
        runtime=runtime,
        agent_github=lambda a: client(agent_caller(a)),
        provider=provider,
        facts=facts,
        agents_root=Path(settings.agents_root),
        workspace=workspace if agent.kind is not RoleKind.PM else None,
        separate_users=separate_users,
        timeout_seconds=settings.turn_timeout_seconds,
        linger_seconds=settings.pm_linger_seconds if agent.kind is RoleKind.PM else 0,
        launch_cause=agent.launch_cause,
        github_traffic=github_http.stats.drain,
        model_gateway=model_gateway,
    )


def read_facts(reader: GitHubClient, agent: AgentRecord, bot_login: str) -> IssueFacts:
    """What the prompts need from GitHub: the issue (its title only if trusted: a writer's or
    vouched for by one), the default branch, a reviewer's PR."""
    repository = reader.get_repository()
    issue = reader.get_issue(agent.issue_number) if agent.issue_number is not None else {}
    default_branch = str(repository.get("default_branch") or "main")
    base, head, head_author = default_branch, "", None
    if agent.kind is RoleKind.REVIEW and agent.pr_number is not None:
        pr = reader.get_pull(agent.pr_number)
        base = str(pr.get("base", {}).get("ref") or default_branch)
        head = str(pr.get("head", {}).get("sha") or "")
        author = authors(reader, bot_login)(pr.get("user"))
        head_author = None if author.authorised else author
    return IssueFacts(
        title=prompt_title(reader, issue, agent, bot_login) if issue else "",
        url=str(issue.get("html_url") or ""),
        default_branch=default_branch,
        base_branch=base,
        head_sha=head,
        head_author=head_author,
    )
