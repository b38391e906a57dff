"""What differs between deployments of the stack, and where it is kept: cdk.context.json.

Each setting is one CDK context key. Values passed with ``cdk deploy -c KEY=VALUE`` are not
kept by CDK, so the next plain ``cdk deploy`` would silently deploy without them (revert the
App's id, or deploy a second stage); ``squadron configure`` writes them to cdk.context.json,
which every ``cdk`` command reads, and the CDK app refuses a deployment value given only on
the command line (:func:`unsaved_values`). Pure pydantic and JSON: the CLI uses it without
the CDK installed, the CDK app (infra/settings.py) adds what only CDK knows.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import ErrorDetails

from squadron.domain.history import DEFAULT_HISTORY_DAYS
from squadron.domain.metrics import namespace
from squadron.domain.retention import DEFAULT_RETENTION_DAYS, MAX_RETENTION_DAYS
from squadron.errors import ConfigurationError

#: Where CDK keeps context values next to cdk.json (it reads the file on every command).
CONTEXT_FILE = "cdk.context.json"

#: The retention periods CloudWatch Logs accepts, in days.
RETENTION_DAYS = (
    1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653,
)  # fmt: skip

#: vCPUs of one agent task (the CDK app's task definition; a test keeps the two equal).
AGENT_TASK_VCPUS = 1.0

#: A name agents may resolve: lowercase labels, at least two, optionally every subdomain (``*.``).
ALLOWED_DOMAIN = re.compile(r"(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]([a-z0-9-]{0,61}[a-z0-9])?")
MAX_DOMAIN_LENGTH = 253

# A synchronous Lambda invocation carries at most 6 MB, so a larger webhook body
# could never reach the ingress function anyway.
LAMBDA_SYNC_PAYLOAD_LIMIT = 6 * 1024 * 1024


class SettingsError(ConfigurationError, ValueError):
    """The context holds a value the app cannot deploy; ``errors`` names each one."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = errors
        lines = "\n".join(f"  - {error}" for error in errors)
        super().__init__(
            f"invalid CDK context ({len(errors)} error{'s' if len(errors) != 1 else ''}):\n{lines}\n"
            f'Fix it with `squadron configure` (it writes {CONTEXT_FILE}) or in cdk.json ("context").'
        )


class DeploymentSettings(BaseModel):
    """What differs between deployments; each field is one CDK context key of the same name."""

    model_config = ConfigDict(frozen=True, extra="forbid", coerce_numbers_to_str=True)

    stage: Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{0,19}$")] = "dev"
    """Deployment name (lowercase, <= 20 chars); part of the stack, dashboard and metric names."""

    account: Annotated[str | None, Field(pattern=r"^\d{12}$")] = None
    """Target AWS account; unset means an environment-agnostic stack."""

    region: Annotated[str | None, Field(pattern=r"^[a-z]{2}(-[a-z]+)+-\d$")] = None
    """Target AWS region; unset means an environment-agnostic stack."""

    github_app_id: Annotated[str, Field(pattern=r"^\d{1,19}$")] = "0"
    """The GitHub App's numeric id ("0" until the App exists: the stack then waits for it)."""

    github_app_slug: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]{0,33}$")] = "squadron"
    """The App's slug; its bot login is `<slug>[bot]` (its own events, assignments, reviews)."""

    alarm_email: Annotated[str | None, Field(pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$")] = None
    """If set, the alarm topic gets an email subscription (confirmed by the recipient)."""

    events_max_receive_count: Annotated[int, Field(ge=1, le=1000)] = 5
    """Receives of one event before it moves to the dead-letter queue."""

    webhook_max_body_bytes: Annotated[int, Field(ge=1024, le=LAMBDA_SYNC_PAYLOAD_LIMIT)] = 2_097_152
    """Larger webhook bodies are refused by the ingress before any parsing."""

    log_retention_days: int = 30
    """Retention of every log group of the stack; one of CloudWatch's allowed periods."""

    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"

    api_throttle_rate_limit: Annotated[float, Field(gt=0, le=10_000)] = 50.0
    """Steady-state requests per second accepted by the webhook API."""

    api_throttle_burst_limit: Annotated[int, Field(ge=1, le=5_000)] = 100
    """Burst of requests accepted by the webhook API above the steady rate."""

    router_max_concurrency: Annotated[int, Field(ge=2, le=1000)] = 5
    """Router invocations at once (SQS's MaximumConcurrency, at least 2): the rest of the account's
    Lambda concurrency stays free for the ingress, which must answer GitHub within 10 s."""

    history_days: Annotated[int, Field(ge=1, le=3653)] = DEFAULT_HISTORY_DAYS
    """How long each repository's domain events stay in the registry as its history, what
    retrospectives are computed from (the items expire by DynamoDB's TTL)."""

    agent_egress: Literal["public", "nat"] = "public"
    """How agent tasks reach GitHub and their model: "public" (default) gives each running task a
    public IPv4 address in a public subnet, with no inbound rule (nothing idles, nothing to pay
    between tasks); "nat" puts them in private subnets behind one NAT gateway, for fixed egress
    addresses (a GitHub IP allow list), at about 36 USD a month more."""

    agent_allowed_domains: tuple[str, ...] = ()
    """Names agent tasks may resolve besides GitHub, Copilot and their own AWS endpoints (the VPC's
    DNS Firewall answers NXDOMAIN for every other name): the package registries and BYOK
    providers the deployment's repositories need, comma-separated (``pypi.org,
    files.pythonhosted.org``); ``*.example.com`` allows every subdomain of example.com. One list
    for every repository: the firewall is the VPC's."""

    state_retention_days: Annotated[int, Field(ge=0, le=MAX_RETENTION_DAYS)] = DEFAULT_RETENTION_DAYS
    """Days a finished (completed or cancelled) agent's working copy and Copilot session stay on
    the agents' file system before the next agent task removes them; 0 removes them as soon as
    no task of the agent runs. Memory and retrospectives are kept regardless."""

    state_backups: bool = False
    """Whether AWS Backup's default plan copies the agents' file system daily (EFS automatic
    backups). Off by default, consistent with ``state_retention_days``: those backups are kept 35
    days in a vault that outlives the stack, so a removed agent's working copy and session would
    stay that much longer. On: the state survives an accidental deletion, for the backups' price."""

    @field_validator("log_retention_days")
    @classmethod
    def _retention_is_allowed(cls, value: int) -> int:
        if value not in RETENTION_DAYS:
            allowed = ", ".join(str(days) for days in RETENTION_DAYS)
            raise ValueError(f"must be one of CloudWatch Logs' retention periods: {allowed}")
        return value

    @field_validator("agent_allowed_domains", mode="before")
    @classmethod
    def _domains_from_text(cls, value: object) -> object:
        # `-c agent_allowed_domains=a.org,b.org` and `squadron configure --set` give one string.
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("agent_allowed_domains")
    @classmethod
    def _domains_are_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for domain in value:
            if not ALLOWED_DOMAIN.fullmatch(domain) or len(domain) > MAX_DOMAIN_LENGTH:
                raise ValueError(
                    f"{domain!r} is not a lowercase domain name (a.example.com, or *.example.com for "
                    "its subdomains); a bare '*' would allow every name"
                )
        return value

    @field_validator("account", "region", "alarm_email", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        # `alarm_email=` means "none", not an invalid address.
        return None if isinstance(value, str) and not value.strip() else value

    @property
    def stack_name(self) -> str:
        return f"Squadron-{self.stage}"

    @property
    def metrics_namespace(self) -> str:
        """Where every component of this stage publishes its metrics (``Squadron/<stage>``)."""
        return namespace(self.stage)

    @property
    def app_configured(self) -> bool:
        return self.github_app_id != "0"

    @classmethod
    def from_context(cls, try_get_context: Callable[[str], object]) -> Self:
        """Build from a CDK context lookup (`app.node.try_get_context`); raise SettingsError."""
        values = {name: try_get_context(name) for name in cls.model_fields}
        return cls.from_mapping({name: value for name, value in values.items() if value is not None})

    @classmethod
    def from_mapping(cls, values: Mapping[str, object]) -> Self:
        try:
            return cls.model_validate({k: v for k, v in values.items() if k in cls.model_fields})
        except ValidationError as exc:
            raise SettingsError([_describe(error) for error in exc.errors()]) from exc


def _describe(error: ErrorDetails) -> str:
    key = ".".join(str(part) for part in error["loc"]) or "<context>"
    return f"context key '{key}': {error['msg']} (got {error['input']!r})"


def read_context(path: Path) -> dict[str, Any]:
    """The JSON object in ``path`` ({} when there is none); ConfigurationError if it is not one."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigurationError(f"not JSON: {exc}", source=str(path)) from exc
    if not isinstance(data, dict):
        raise ConfigurationError("not a JSON object", source=str(path))
    return data


def _context_of(path: Path) -> dict[str, Any]:
    """The "context" object of a cdk.json-shaped file ({} when none)."""
    context = read_context(path).get("context", {})
    return context if isinstance(context, dict) else {}


def saved_values(
    directory: Path, *, home: Path | None = None, context_file: Path | None = None
) -> dict[str, Any]:
    """The deployment values `cdk` run in ``directory`` reads from files, in the CDK CLI's order
    (its Context: the first of --context, cdk.json's "context", cdk.context.json and ~/.cdk.json's
    "context" that holds a key gives it): so cdk.json's context over cdk.context.json (``context_file``
    when another), over the user's ~/.cdk.json (``home``: the user's home directory)."""
    user = _context_of((home if home is not None else Path.home()) / ".cdk.json")
    kept = read_context(context_file if context_file is not None else directory / CONTEXT_FILE)
    saved = {**user, **kept, **_context_of(directory / "cdk.json")}
    return {key: value for key, value in saved.items() if key in DeploymentSettings.model_fields}


#: Where cdk.context.json keeps the values of the stages not chosen now, by stage: the top-level
#: keys (what every `cdk` command reads) are always the chosen stage's own.
STAGES_KEY = "squadron:stages"


def switch_stage(context: Mapping[str, Any], stage: str) -> dict[str, Any]:
    """``context`` with ``stage`` chosen: the current stage's values put aside under
    :data:`STAGES_KEY`, the new stage's own brought back (none kept: every default), so that a
    stage is never deployed with another's App id, account or region."""
    if "stage" not in context:  # the first stage chosen adopts the values (make deploy needs a stage)
        return {**context, "stage": stage}
    current = str(context["stage"])
    if stage == current:
        return dict(context)
    kept = context.get(STAGES_KEY)
    stages: dict[str, Any] = dict(kept) if isinstance(kept, Mapping) else {}
    own = {k: v for k, v in context.items() if k in DeploymentSettings.model_fields and k != "stage"}
    stages[current] = own
    restored = stages.pop(stage, {})
    others = {
        k: v for k, v in context.items() if k not in DeploymentSettings.model_fields and k != STAGES_KEY
    }
    return {
        **others,
        **(restored if isinstance(restored, Mapping) else {}),
        "stage": stage,
        **({STAGES_KEY: stages} if stages else {}),
    }


def configure(path: Path, changes: Mapping[str, object | None]) -> DeploymentSettings:
    """Write ``changes`` (None removes a key: its default applies) into the context file ``path``,
    keeping every other key (CDK's own lookups), after validating the whole; the result. A new
    ``stage`` brings back that stage's own values and puts the others aside (:func:`switch_stage`)."""
    context = read_context(path)
    for key in changes:
        if key not in DeploymentSettings.model_fields:
            raise SettingsError([f"context key '{key}': not a Squadron setting"])
    stage = changes.get("stage")
    if stage is not None:
        DeploymentSettings.from_mapping({"stage": stage})
        context = switch_stage(context, str(stage))
    merged = {**context, **{k: v for k, v in changes.items() if v is not None}}
    for key, value in changes.items():
        if value is None:
            merged.pop(key, None)
    settings = DeploymentSettings.from_mapping(merged)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(merged, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(temporary, path)
    return settings


def unsaved_values(effective: Mapping[str, object], saved: Mapping[str, object]) -> dict[str, object]:
    """Deployment values in ``effective`` (what the CDK app was given) that the files do not
    hold: given with ``-c``, they would be gone at the next deploy."""
    return {
        key: value
        for key, value in effective.items()
        if key in DeploymentSettings.model_fields and value is not None and str(value) != str(saved.get(key))
    }


# --- where a deployment is, as `cdk deploy` finds it ---------------------------------------------

#: The region `cdk` deploys an environment-agnostic stack to when nothing names one (the AWS CLI's).
CDK_FALLBACK_REGION = "us-east-1"
#: The variables the CDK CLI reads the region from, first first (its SdkProvider; boto3 reads only
#: AWS_DEFAULT_REGION, so the two can differ).
CDK_REGION_VARIABLES = ("AWS_REGION", "AMAZON_REGION", "AWS_DEFAULT_REGION", "AMAZON_DEFAULT_REGION")


class Deployed(BaseModel):
    """One stage as `cdk deploy` would deploy it: its stack, its region and where each came from."""

    model_config = ConfigDict(frozen=True)

    stage: str
    region: str
    stage_from: str
    region_from: str

    @property
    def stack_name(self) -> str:
        return f"Squadron-{self.stage}"


def deployed(
    context_file: Path,
    *,
    stage: str | None = None,
    environ: Mapping[str, str],
    home: Path,
) -> Deployed:
    """Where ``stage`` (default: the stage the checkout of ``context_file`` deploys) is deployed: its
    region is its own deployment value (a stage not chosen now keeps its own under
    :data:`STAGES_KEY`; cdk.json's context and ~/.cdk.json's apply to every stage, as cdk reads
    them), else the region the CDK CLI falls back to (:func:`cdk_default_region`). So an operator
    command reads the resources `cdk deploy` made, never another stage's or region's."""
    directory = context_file.parent
    values = saved_values(directory, home=home, context_file=context_file)
    current = str(values.get("stage", "dev"))
    stage_from = _source("stage", directory, context_file, home) if "stage" in values else "the default"
    other = stage is not None and stage != current
    own: Mapping[str, Any] = {}
    if other:
        aside = read_context(context_file).get(STAGES_KEY, {})
        kept = aside.get(stage, {}) if isinstance(aside, Mapping) else {}
        own = kept if isinstance(kept, Mapping) else {}
        values = {
            **_context_of(home / ".cdk.json"),
            **own,
            **_context_of(directory / "cdk.json"),
            "stage": stage,
        }
        stage_from = "given"
    DeploymentSettings.from_mapping(values)  # a bad value is refused here, as cdk refuses it
    if values.get("region"):
        region = str(values["region"])
        region_from = _source("region", directory, context_file, home, own if other else None)
    else:
        region, region_from = cdk_default_region(environ, home)
    return Deployed(
        stage=str(values.get("stage", current)), region=region, stage_from=stage_from, region_from=region_from
    )


def _source(
    key: str, directory: Path, context_file: Path, home: Path, own: Mapping[str, Any] | None = None
) -> str:
    """Which file gives ``key`` its value, in the CDK CLI's order (``own``: another stage's values,
    kept aside in ``context_file``, instead of its top-level keys)."""
    if key in _context_of(directory / "cdk.json"):
        return str(directory / "cdk.json")
    if own is not None and key in own:
        return f"its own values in {context_file}"
    if own is None and key in read_context(context_file):
        return str(context_file)
    return str(home / ".cdk.json")


def cdk_default_region(environ: Mapping[str, str], home: Path) -> tuple[str, str]:
    """The region the CDK CLI deploys an environment-agnostic stack to, and where it came from:
    the first of AWS_REGION, AMAZON_REGION, AWS_DEFAULT_REGION, AMAZON_DEFAULT_REGION; then the
    profile's region (AWS_PROFILE, AWS_DEFAULT_PROFILE or default) in the shared credentials file,
    then in the config file, then the default profile's in each; then us-east-1. (The CDK CLI also
    asks an EC2 instance's metadata service last; a deployer's machine is not one.)"""
    for variable in CDK_REGION_VARIABLES:
        if environ.get(variable):
            return environ[variable], f"${variable}"
    profile = environ.get("AWS_PROFILE") or environ.get("AWS_DEFAULT_PROFILE") or "default"
    credentials = Path(environ.get("AWS_SHARED_CREDENTIALS_FILE") or home / ".aws" / "credentials")
    config = Path(environ.get("AWS_CONFIG_FILE") or home / ".aws" / "config")
    for name in dict.fromkeys((profile, "default")):
        for path, section in (
            (credentials, name),
            (config, name if name == "default" else f"profile {name}"),
        ):
            region = _ini_value(path, section, "region")
            if region:
                return region, f"profile {name} in {path}"
    return CDK_FALLBACK_REGION, "CDK's fallback (no region configured)"


def _ini_value(path: Path, section: str, key: str) -> str | None:
    import configparser  # noqa: PLC0415

    parser = configparser.RawConfigParser()
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError):
        return None
    value = parser.get(section, key, fallback=None) if parser.has_section(section) else None
    return value.strip() if value and value.strip() else None


# --- where the App's key material is kept --------------------------------------------------------


#: The App's private key in that directory (`squadron app create` writes it, the doctor finds it).
APP_PRIVATE_KEY_FILE = "private-key.pem"


def app_key_directory(stage: str, *, environ: Mapping[str, str], home: Path) -> Path:
    """Where `squadron app create` keeps a stage's App private key and webhook secret by default:
    the user's, per stage, outside any checkout ($XDG_CONFIG_HOME/squadron/<stage>/github-app,
    ~/.config by default), so that no commit, no `git add -A` and no image build context takes them."""
    base = Path(environ.get("XDG_CONFIG_HOME") or home / ".config")
    return base / "squadron" / stage / "github-app"


def work_tree_of(path: Path) -> Path | None:
    """The git work tree ``path`` (which need not exist yet) lies in, or None: the nearest directory
    holding a ``.git`` (a repository's directory, or a worktree's or submodule's file)."""
    resolved = path.expanduser().resolve()
    for directory in (resolved, *resolved.parents):
        if (directory / ".git").exists():
            return directory
    return None
