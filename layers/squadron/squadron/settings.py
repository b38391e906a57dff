"""Runtime settings of each Lambda and the agent host, read once from the environment.

Every setting is a pydantic model; :func:`load_settings` turns every problem
into one :class:`~squadron.errors.ConfigurationError` that names each variable.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Annotated, Literal, TypeVar

from pydantic import AliasChoices, BaseModel, BeforeValidator, ConfigDict, Field, SecretStr, ValidationError

from squadron.domain.dashboard_refresh import MAX_DELAY_SECONDS, REFRESH_INTERVAL
from squadron.domain.history import DEFAULT_HISTORY_DAYS
from squadron.domain.pipeline_wire import PREFIX_PATTERN
from squadron.domain.retention import DEFAULT_RETENTION_DAYS, MAX_RETENTION_DAYS
from squadron.domain.webhook import app_bot_login
from squadron.errors import ConfigurationError

#: GitHub caps webhook payloads at 25 MB, API Gateway at 10 MB and Lambda at 6 MB;
#: every event the router handles is far smaller than this default.
DEFAULT_MAX_BODY_BYTES = 2 * 1024 * 1024

#: The longest a Lambda waits out a GitHub rate limit before giving the work back (a longer wait
#: fails the record, which returns to the queue): a fraction of the router's timeout per record.
LAMBDA_RATE_LIMIT_WAIT_SECONDS = 20

#: A GitHub App's slug (its bot login is ``<slug>[bot]``).
APP_SLUG_PATTERN = r"^[a-z0-9][a-z0-9-]{0,33}$"

#: The App id of a stack deployed before its GitHub App exists (the deploy guide's first deploy).
UNCONFIGURED_APP_ID = 0


class AppNotConfiguredError(ConfigurationError):
    """The stack was deployed before its GitHub App existed (GITHUB_APP_ID is 0): there is no App
    to act as yet. Not a fault of the deployment, a step of it: callers answer with a clear no-op
    (the reconciler) or hold the work (the ingress, the router), never drop it."""

    def __init__(self, component: str) -> None:
        self.component = component
        super().__init__(
            f"the stack does not know its GitHub App yet (GITHUB_APP_ID={UNCONFIGURED_APP_ID}): create the "
            "App (squadron app create), then deploy with its id and slug "
            "(squadron configure --github-app-id ID --github-app-slug SLUG; make deploy)",
            source=component,
        )


def app_configured(environ: Mapping[str, str] | None = None) -> bool:
    """False when GITHUB_APP_ID is the placeholder of a stack deployed before its App (0)."""
    env = os.environ if environ is None else environ
    return env.get("GITHUB_APP_ID", "").strip() != str(UNCONFIGURED_APP_ID)


class IngressSettings(BaseModel):
    """Environment of the ingress Lambda."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    events_queue_url: str = Field(validation_alias="EVENTS_QUEUE_URL", min_length=1)
    webhook_secret_arn: str = Field(validation_alias="WEBHOOK_SECRET_ARN", min_length=1)
    github_app_id: int = Field(validation_alias="GITHUB_APP_ID", ge=0)
    github_app_slug: str = Field(validation_alias="GITHUB_APP_SLUG", pattern=APP_SLUG_PATTERN)
    max_body_bytes: int = Field(
        default=DEFAULT_MAX_BODY_BYTES,
        validation_alias=AliasChoices("MAX_BODY_BYTES"),
        ge=1024,
        le=25 * 1024 * 1024,
    )
    secret_cache_seconds: int = Field(
        default=300, validation_alias=AliasChoices("SECRET_CACHE_SECONDS"), ge=0, le=3600
    )


SettingsT = TypeVar("SettingsT", bound=BaseModel)


def load_settings(model: type[SettingsT], environ: Mapping[str, str] | None = None) -> SettingsT:
    """Validate ``model`` from the environment; every problem named in one error."""
    env = dict(os.environ if environ is None else environ)
    try:
        return model.model_validate(env)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            name = ".".join(str(part) for part in error["loc"])
            value = env.get(name)
            shown = "" if value is None or "SECRET" in name else f" (got {value!r})"
            message = "is required" if error["type"] == "missing" else error["msg"]
            problems.append(f"{name} {message}{shown}")
        raise ConfigurationError("; ".join(problems), source=f"{model.__name__} environment") from exc


def _comma_list(value: object) -> object:
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


class GitHubAppSettings(BaseModel):
    """The GitHub App a Lambda acts as: its id, where its private key is, the API it talks to."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    github_app_id: int = Field(validation_alias="GITHUB_APP_ID", ge=1)
    github_private_key_secret_arn: str = Field(validation_alias="GITHUB_PRIVATE_KEY_SECRET_ARN", min_length=1)
    github_api_url: str = Field(
        default="https://api.github.com",
        validation_alias=AliasChoices("GITHUB_API_URL"),
        pattern=r"^(https://|http://(127\.0\.0\.1|localhost)(:\d+)?(/|$))",
    )
    secret_cache_seconds: int = Field(
        default=300, validation_alias=AliasChoices("SECRET_CACHE_SECONDS"), ge=0, le=3600
    )


class _AppLogin(BaseModel):
    """The App's slug, for what the App itself did (its assignments, reviews, pull requests)."""

    github_app_slug: str = Field(validation_alias="GITHUB_APP_SLUG", pattern=APP_SLUG_PATTERN)

    @property
    def bot_login(self) -> str:
        return app_bot_login(self.github_app_slug)


class RouterSettings(GitHubAppSettings, _AppLogin):
    """Environment of the router Lambda."""

    registry_table_name: str = Field(validation_alias="REGISTRY_TABLE_NAME", min_length=3)
    agent_cluster: str = Field(validation_alias="AGENT_CLUSTER", min_length=1)
    agent_task_definition: str = Field(validation_alias="AGENT_TASK_DEFINITION", min_length=1)
    agent_container_name: str = Field(validation_alias="AGENT_CONTAINER_NAME", min_length=1)
    agent_subnets: Annotated[list[str], BeforeValidator(_comma_list)] = Field(
        validation_alias="AGENT_SUBNETS", min_length=1
    )
    agent_security_groups: Annotated[list[str], BeforeValidator(_comma_list)] = Field(
        validation_alias="AGENT_SECURITY_GROUPS", min_length=1
    )
    #: ENABLED: agent tasks run in public subnets with a public IPv4 address (no NAT gateway).
    agent_assign_public_ip: Literal["ENABLED", "DISABLED"] = Field(
        default="DISABLED", validation_alias=AliasChoices("AGENT_ASSIGN_PUBLIC_IP")
    )
    #: The agents' file system: set, each repository's tasks run a task definition of its own that
    #: mounts only its own access point (made at its first launch); unset, every task runs
    #: ``agent_task_definition``.
    agent_file_system_id: str | None = Field(
        default=None, validation_alias=AliasChoices("AGENT_FILE_SYSTEM_ID"), min_length=1
    )
    policy_ttl_seconds: int = Field(
        default=60, validation_alias=AliasChoices("POLICY_TTL_SECONDS"), ge=0, le=3600
    )
    #: events.fifo: the merge gate puts the App's own merges there (their webhooks are dropped).
    events_queue_url: str = Field(validation_alias="EVENTS_QUEUE_URL", min_length=1)
    #: How long the domain events the router commits stay readable as their repository's history
    #: (what retrospectives are computed from), in days.
    history_days: int = Field(
        default=DEFAULT_HISTORY_DAYS, validation_alias=AliasChoices("SQUADRON_HISTORY_DAYS"), ge=1, le=3653
    )
    #: The deployment's pipelines (docs/pipelines.md): their state machines are named
    #: ``<PIPELINES_PREFIX>_<repository id>-<pipeline>`` and run by ``PIPELINES_ROLE_ARN``; without
    #: both, no pipeline is published or started.
    pipelines_prefix: str | None = Field(
        default=None,
        validation_alias=AliasChoices("PIPELINES_PREFIX"),
        pattern=PREFIX_PATTERN,
    )
    pipelines_role_arn: str | None = Field(
        default=None, validation_alias=AliasChoices("PIPELINES_ROLE_ARN"), min_length=20
    )


class ReconcilerSettings(GitHubAppSettings, _AppLogin):
    """Environment of the reconciler Lambda."""

    registry_table_name: str = Field(validation_alias="REGISTRY_TABLE_NAME", min_length=3)
    events_queue_url: str = Field(validation_alias="EVENTS_QUEUE_URL", min_length=1)
    #: GitHub reads per installation and run (see squadron.shell.reconciler).
    max_reads: int = Field(default=200, validation_alias=AliasChoices("RECONCILER_MAX_READS"), ge=1, le=2_000)
    #: The agent tasks' cluster: asked which tasks still run (without it, heartbeats decide alone).
    agent_cluster: str | None = Field(default=None, validation_alias=AliasChoices("AGENT_CLUSTER"))
    config_ttl_seconds: int = Field(
        default=300, validation_alias=AliasChoices("CONFIG_TTL_SECONDS"), ge=0, le=3600
    )
    #: The stage's EventBridge Scheduler group and the role its schedules send with: each
    #: repository's retrospective schedule is kept there (without them, none is kept).
    schedule_group: str | None = Field(default=None, validation_alias=AliasChoices("SCHEDULE_GROUP"))
    scheduler_role_arn: str | None = Field(default=None, validation_alias=AliasChoices("SCHEDULER_ROLE_ARN"))
    #: The dashboards queue: each run asks it for every repository's dashboard (None: none asked).
    dashboard_queue_url: str | None = Field(
        default=None, validation_alias=AliasChoices("DASHBOARD_QUEUE_URL"), min_length=1
    )
    #: The deployment's pipelines (docs/pipelines.md): their state machines are named
    #: ``<PIPELINES_PREFIX>_<repository id>-<pipeline>`` and run by ``PIPELINES_ROLE_ARN``; without
    #: both, no pipeline is published or started.
    pipelines_prefix: str | None = Field(
        default=None,
        validation_alias=AliasChoices("PIPELINES_PREFIX"),
        pattern=PREFIX_PATTERN,
    )
    pipelines_role_arn: str | None = Field(
        default=None, validation_alias=AliasChoices("PIPELINES_ROLE_ARN"), min_length=20
    )


class DashboardSettings(GitHubAppSettings, _AppLogin):
    """Environment of the dashboards Lambda (the dashboards queue -> each repository's issue)."""

    registry_table_name: str = Field(validation_alias="REGISTRY_TABLE_NAME", min_length=3)
    #: Its own queue, where it puts deferred renderings (delayed messages).
    dashboard_queue_url: str = Field(validation_alias="DASHBOARD_QUEUE_URL", min_length=1)
    #: The shortest time between two edits of one repository's dashboard, in seconds. The stack
    #: sets 60, over its Lambda's timeout (renderings never overlap); tests and the local stack
    #: may shorten it.
    refresh_seconds: int = Field(
        default=int(REFRESH_INTERVAL.total_seconds()),
        validation_alias=AliasChoices("DASHBOARD_REFRESH_SECONDS"),
        ge=1,
        le=MAX_DELAY_SECONDS,
    )
    config_ttl_seconds: int = Field(
        default=300, validation_alias=AliasChoices("CONFIG_TTL_SECONDS"), ge=0, le=3600
    )
    #: The deployment's pipelines, read for the "Pipelines" section (each running run's current
    #: stages): without both, the section is left out.
    pipelines_prefix: str | None = Field(
        default=None,
        validation_alias=AliasChoices("PIPELINES_PREFIX"),
        pattern=PREFIX_PATTERN,
    )
    pipelines_role_arn: str | None = Field(
        default=None, validation_alias=AliasChoices("PIPELINES_ROLE_ARN"), min_length=20
    )


class GatewaySettings(GitHubAppSettings, _AppLogin):
    """Environment of the agent gateway Lambda (the one door of agent tasks)."""

    registry_table_name: str = Field(validation_alias="REGISTRY_TABLE_NAME", min_length=3)
    events_queue_url: str = Field(validation_alias="EVENTS_QUEUE_URL", min_length=1)
    #: The Copilot token's secret, for roles whose model is served through Copilot.
    copilot_token_secret: str | None = Field(
        default=None, validation_alias=AliasChoices("COPILOT_GITHUB_TOKEN_SECRET")
    )
    config_ttl_seconds: int = Field(
        default=300, validation_alias=AliasChoices("CONFIG_TTL_SECONDS"), ge=0, le=3600
    )
    #: Days a finished agent's working copy and session stay on the shared volume (0: removed by
    #: the first task that starts once no task of it runs); the stage's ``state_retention_days``.
    state_retention_days: int = Field(
        default=DEFAULT_RETENTION_DAYS,
        validation_alias=AliasChoices("SQUADRON_STATE_RETENTION_DAYS"),
        ge=0,
        le=MAX_RETENTION_DAYS,
    )


class PublisherSettings(BaseModel):
    """Environment of the domain event publisher Lambda (the registry's stream -> the bus)."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    event_bus_name: str = Field(validation_alias="EVENT_BUS_NAME", min_length=1, max_length=256)
    stage: str = Field(validation_alias="STAGE", min_length=1, max_length=64)


#: The local stack model's key, in the agent host's environment only (its model gateway adds it).
MODEL_KEY_ENV = "SQUADRON_MODEL_KEY"


class AgentSettings(BaseModel):
    """Environment of an agent task (the ECS task definition, plus RunTask's per-launch overrides)."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    agent_id: str = Field(validation_alias="SQUADRON_AGENT_ID", min_length=1)
    launch_token: str = Field(validation_alias="SQUADRON_LAUNCH_TOKEN", min_length=1, max_length=64)
    #: The launch's secret (a RunTask override): what every call to the gateway presents.
    launch_secret: SecretStr = Field(validation_alias="SQUADRON_LAUNCH_SECRET", min_length=16)
    gateway_function: str = Field(validation_alias="AGENT_GATEWAY_FUNCTION", min_length=1)
    #: Where agents' directories live (the EFS mount in ECS): one directory per agent, owned by
    #: the agent's own POSIX user, and the framework's clones beside them.
    agents_root: str = Field(validation_alias="SQUADRON_AGENTS_ROOT", min_length=1)
    copilot_cli_path: str = Field(validation_alias="COPILOT_CLI_PATH", min_length=1)
    #: The Copilot CLI's unpacked package, shared read-only by every agent's CLI.
    copilot_cache: str | None = Field(default=None, validation_alias=AliasChoices("XDG_CACHE_HOME"))
    github_api_url: str = Field(
        default="https://api.github.com",
        validation_alias=AliasChoices("GITHUB_API_URL"),
        pattern=r"^(https://|http://(127\.0\.0\.1|localhost)(:\d+)?(/|$))",
    )
    turn_timeout_seconds: int = Field(
        default=3600, validation_alias=AliasChoices("TURN_TIMEOUT_SECONDS"), ge=60, le=4 * 3600
    )
    #: How long a PM task waits for more news once its inbox is empty before it ends: a burst of
    #: events is one batch, not a task per event (a task start costs far more than the wait).
    pm_linger_seconds: float = Field(
        default=30, validation_alias=AliasChoices("SQUADRON_PM_LINGER_SECONDS"), ge=0, le=600
    )
    #: Copilot's API and the GitHub API that checks a Copilot token, for a role with no BYOK provider:
    #: the task's model gateway forwards the Copilot CLI's calls there with the token (docs/security.md).
    copilot_api_url: str = Field(
        default="https://api.githubcopilot.com",
        validation_alias=AliasChoices("SQUADRON_COPILOT_API_URL"),
        pattern=r"^(https://|http://(127\.0\.0\.1|localhost)(:\d+)?(/|$))",
    )
    copilot_github_api_url: str = Field(
        default="https://api.github.com",
        validation_alias=AliasChoices("SQUADRON_COPILOT_GITHUB_API_URL"),
        pattern=r"^(https://|http://(127\.0\.0\.1|localhost)(:\d+)?(/|$))",
    )
    #: The local stack's model (an OpenAI-compatible URL on loopback): every role uses it.
    model_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("SQUADRON_MODEL_URL"),
        pattern=r"^http://(127\.0\.0\.1|localhost)(:\d+)?/",
    )
    #: The local stack model's key (the model gateway adds it; the CLI never sees it).
    model_key: SecretStr | None = Field(default=None, validation_alias=AliasChoices(MODEL_KEY_ENV))
    #: The git remote of a repository; ``{repo}`` is owner/name.
    git_remote_template: str = Field(
        default="https://github.com/{repo}.git",
        validation_alias=AliasChoices("GIT_REMOTE_TEMPLATE"),
        pattern=r"\{repo\}",
    )
