"""What the local stack is made of (:mod:`squadron.local.stack`): its options, the sandbox App's
identity and key, and the environment it gives the in-process Lambdas and the agent processes
(the CDK stack's function and task-definition settings, pointed at the stand-ins on loopback)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from squadron.adapters.github.auth import GitHubApp
from squadron.adapters.github.client import GitHubAppClient
from squadron.adapters.github.errors import GitHubError
from squadron.adapters.github.http import GitHubHttp
from squadron.adapters.local_aws import EVENTS_VISIBILITY, ROUTER_RUN, LocalResources
from squadron.domain.dashboard_refresh import REFRESH_INTERVAL
from squadron.domain.permissions import Caller
from squadron.domain.retention import DEFAULT_RETENTION_DAYS
from squadron.local.copilot_cli import cli_paths
from squadron.local.credentials import CredentialsError, GitHubAppCredentials
from squadron.local.model import Policy
from squadron.settings import MODEL_KEY_ENV

APP_ID = 424242
APP_SLUG = "squadron"
INSTALLATION_ID = 77
WEBHOOK_SECRET = "squadron-local-webhook-secret"  # noqa: S105 (the local sandbox's, on loopback)
GATEWAY_FUNCTION = "squadron-local-gateway"
COPILOT_TOKEN_SECRET = "squadron-local/copilot-token"  # noqa: S105 (a secret's name)
LAMBDA_SERVICE = "squadron-local"  # the Powertools service name of the in-process Lambdas
HUMANS = {"octo-human": "admin", "octo-maintainer": "admin", "alice": "write"}


@dataclass(frozen=True)
class AgentRuntime:
    command: tuple[str, ...]
    environment: dict[str, str]


@dataclass
class LocalOptions:
    root: Path  # the repository (functions/, node_modules/, .squadron/)
    state_dir: Path
    repo: str = "octo/demo"
    reconcile_seconds: float = 30.0
    model_policy: Policy | None = None
    #: Extra files of the sandbox repository (its .squadron comes from the repository's own).
    files: dict[str, str] = field(default_factory=dict)
    #: How long a PM task waits for more news before it ends (batches a burst of events).
    pm_linger_seconds: float = 30.0
    #: A GitHub App on real GitHub (no sandbox); None starts the sandbox.
    github: GitHubAppCredentials | None = None
    #: With real GitHub: agents use their roles' models through Copilot with this token (kept in
    #: the local Secrets Manager); None: the local scripted model serves every role.
    copilot_token: str | None = None
    #: The webhook endpoint's port (0: any free one); a tunnel needs a fixed one.
    port: int = 0
    #: The GitHub sandbox's port (its REST API and the pages a person browses under ``/ui/``);
    #: 0: any free one. When it is taken, any free one (:attr:`LocalStack.sandbox_port_taken`).
    sandbox_port: int = 0
    #: More sandbox repositories, set up like ``repo`` (the App is installed on all of them).
    extra_repos: tuple[str, ...] = ()
    #: How long an unanswered batch stays hidden in events.fifo: longer than a launch's arming is
    #: held (:data:`~squadron.adapters.local_aws.EVENTS_VISIBILITY` says why); tests shorten it so
    #: a crashed batch comes back quickly.
    visibility_timeout: int = int(EVENTS_VISIBILITY.total_seconds())
    #: How long a router run may last before it is stopped and its batch left to come back, as
    #: Lambda ends the router's (:data:`~squadron.adapters.local_aws.ROUTER_RUN`, the CDK stack's
    #: timeout; :mod:`squadron.local.invocation`).
    router_timeout: float = ROUTER_RUN.total_seconds()
    #: Agent tasks from another runtime than this checkout's (the agent image's, assembled
    #: without a container engine): its command, and its environment (the image's and the task
    #: definition's, paths mapped onto this machine). The stack adds only its stand-ins for AWS,
    #: GitHub and the model.
    agent_runtime: AgentRuntime | None = None
    #: Days a finished agent's working copy and session stay under ``<state>/agents`` (the
    #: stage's ``state_retention_days``; 0: removed by the next task once no task of it runs).
    state_retention_days: int = DEFAULT_RETENTION_DAYS
    #: The shortest time between two renderings of a repository's dashboard issue (the stage's is
    #: a minute; tests shorten it so that a deferred rendering comes soon).
    dashboard_refresh_seconds: int = int(REFRESH_INTERVAL.total_seconds())
    #: With the sandbox: a stand-in CI passes the check ``ci`` on every open pull request's head
    #: (:class:`~squadron.local.showcase.StandInCI`; the showcase's, which runs no tests).
    stand_in_ci: bool = False
    #: How long the Lambdas keep a repository's configuration (POLICY_TTL_SECONDS and
    #: CONFIG_TTL_SECONDS; the stage's are 300 s). Tests that push a new default-branch
    #: configuration set 0: the next event reads it (docs/local-stack.md).
    config_ttl_seconds: int = 5
    #: A test clock: the moto server's Step Functions ``Wait`` states pass this many times faster
    #: (a reminder's hour in a second at 3600; :mod:`squadron.adapters.moto_clock`). Task and run
    #: timeouts are as written. 1: as written (docs/local-stack.md).
    wait_scale: int = 1


def app_slug(api_url: str, app_id: int, private_key: str) -> str:
    """The App's slug from GitHub (GET /app with its JWT): checks the id and key belong together."""
    app = GitHubApp(app_id=app_id, http=GitHubHttp(base_url=api_url), private_key=lambda: private_key)
    client = GitHubAppClient(http=app.http, jwt=app.jwt, app_id=app_id, caller=Caller.framework())
    try:
        return str(client.get_app()["slug"])
    except GitHubError as exc:
        raise CredentialsError(
            f"{api_url} refused the App's JWT ({exc}): check that the App id and the private key "
            "are the same App's"
        ) from exc


def private_key(path: Path) -> str:
    """The sandbox App's key, made once per state directory (a restart keeps the same App)."""
    if path.exists():
        return path.read_text(encoding="utf-8")
    pem = _new_private_key()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(pem, encoding="utf-8")
    path.chmod(0o600)
    return pem


def _new_private_key() -> str:
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415
    from cryptography.hazmat.primitives.asymmetric import rsa  # noqa: PLC0415

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def lambda_environment(
    r: LocalResources, options: LocalOptions, *, app_id: int, app_slug: str, github_url: str
) -> dict[str, str]:
    """The in-process Lambdas' environment, as the CDK stack sets each function's."""
    return {
        "EVENTS_QUEUE_URL": r.queue_url,
        "DASHBOARD_QUEUE_URL": r.dashboard_queue_url,
        "DASHBOARD_REFRESH_SECONDS": str(options.dashboard_refresh_seconds),
        "WEBHOOK_SECRET_ARN": r.webhook_secret_arn,
        "GITHUB_APP_ID": str(app_id),
        "GITHUB_APP_SLUG": app_slug,
        "GITHUB_PRIVATE_KEY_SECRET_ARN": r.private_key_arn,
        "GITHUB_API_URL": github_url,
        "REGISTRY_TABLE_NAME": r.table_name,
        "AGENT_CLUSTER": r.cluster_arn,
        "AGENT_TASK_DEFINITION": r.task_definition_arn,
        "AGENT_CONTAINER_NAME": "agent",
        "AGENT_SUBNETS": ",".join(r.subnets),
        "AGENT_SECURITY_GROUPS": ",".join(r.security_groups),
        "POLICY_TTL_SECONDS": str(options.config_ttl_seconds),
        "CONFIG_TTL_SECONDS": str(options.config_ttl_seconds),
        "SQUADRON_STATE_RETENTION_DAYS": str(options.state_retention_days),
        "SCHEDULE_GROUP": r.schedule_group,
        "SCHEDULER_ROLE_ARN": r.scheduler_role_arn,
        "PIPELINES_PREFIX": r.pipelines_prefix,
        "PIPELINES_ROLE_ARN": r.pipelines_role_arn,
        "POWERTOOLS_SERVICE_NAME": LAMBDA_SERVICE,
        "POWERTOOLS_METRICS_NAMESPACE": "SquadronLocal",
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_METRICS_DISABLED": "true",
        **({"COPILOT_GITHUB_TOKEN_SECRET": COPILOT_TOKEN_SECRET} if options.copilot_token else {}),
    }


def agent_environment(
    options: LocalOptions,
    *,
    endpoint: str,
    agents_root: Path,
    github_url: str,
    model_url: str | None,
    model_key: str | None,
    remote: str,
) -> dict[str, str]:
    """An agent process's environment: the agent image's (or this checkout's) and the stack's
    stand-ins for AWS, GitHub and the model."""
    state = options.state_dir
    # The local model serves every role; with a Copilot token, each role's configured model
    # (whose key the gateway hands out).
    model = (
        {"SQUADRON_MODEL_URL": model_url + "/", MODEL_KEY_ENV: model_key or ""}
        if model_url is not None
        else {}
    )
    # What stands in for AWS (the task role's one right: invoking the gateway), GitHub and the
    # model on this machine; and where agents' directories are (the EFS volume's stand-in).
    stand_ins = {
        **model,
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL_LAMBDA": endpoint,
        "AGENT_GATEWAY_FUNCTION": GATEWAY_FUNCTION,
        "SQUADRON_AGENTS_ROOT": str(agents_root),
        "SQUADRON_PM_LINGER_SECONDS": str(options.pm_linger_seconds),
        "GITHUB_API_URL": github_url,
        "GIT_REMOTE_TEMPLATE": remote,
        "TURN_TIMEOUT_SECONDS": "300",
    }
    runtime = options.agent_runtime
    if runtime is not None:
        return {**runtime.environment, **stand_ins}
    cli, cache = cli_paths(options.root)
    return {
        **model,
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(state / "home"),
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
        # The task role's one right: invoking the gateway (no registry, queue or secrets).
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL_LAMBDA": endpoint,
        "AGENT_GATEWAY_FUNCTION": GATEWAY_FUNCTION,
        "SQUADRON_AGENTS_ROOT": str(agents_root),
        "SQUADRON_PM_LINGER_SECONDS": str(options.pm_linger_seconds),
        "COPILOT_CLI_PATH": str(cli),
        "XDG_CACHE_HOME": str(cache),
        "GITHUB_API_URL": github_url,
        "GIT_REMOTE_TEMPLATE": remote,
        "TURN_TIMEOUT_SECONDS": "300",
    }
