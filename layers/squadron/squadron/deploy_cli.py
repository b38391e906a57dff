"""The deployer's subcommands: `squadron configure` (the deployment's values, kept in
cdk.context.json where every `cdk` command reads them) and `squadron doctor` (what a deploy
needs, checked before it fails half-way).
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from squadron.cli_types import repo_name
from squadron.deployment import (
    AGENT_TASK_VCPUS,
    APP_PRIVATE_KEY_FILE,
    CONTEXT_FILE,
    DeploymentSettings,
    SettingsError,
    app_key_directory,
    configure,
    deployed,
    read_context,
    saved_values,
)
from squadron.domain.app_check import judge_grants, judge_hook, judge_identity, judge_installation
from squadron.domain.app_manifest import GITHUB_API_URL, app_events, app_permissions
from squadron.domain.preflight import (
    ECS_SERVICE_ROLE,
    ConcurrencyBudget,
    Finding,
    concurrency_budget,
    failed,
    judge_bootstrap,
    judge_copilot_token,
    judge_ecs_service_role,
    judge_fargate,
    judge_lambda_concurrency,
    judge_private_key,
    judge_webhook,
    judge_webhook_secret,
)
from squadron.domain.webhook import app_bot_login
from squadron.errors import ConfigurationError

if TYPE_CHECKING:
    from squadron.adapters.preflight import AwsFacts

EXIT_OK = 0
EXIT_PROBLEMS = 1

#: The options of `squadron configure` for the values a deployer sets; --set covers the rest.
_NAMED = ("stage", "account", "region", "github_app_id", "github_app_slug", "alarm_email")


def configure_configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stage", help="deployment name: the stack is Squadron-<stage> (default: dev)")
    parser.add_argument("--account", help="pin the stack to this AWS account (12 digits)")
    parser.add_argument("--region", help="pin the stack to this AWS region (e.g. eu-west-1)")
    parser.add_argument("--github-app-id", help="the GitHub App's id (0 until it exists)")
    parser.add_argument("--github-app-slug", help="the App's slug: its login is <slug>[bot]")
    parser.add_argument("--alarm-email", help="subscribe this address to the alarms (empty: none)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any other deployment value (see docs/operations.md's table), e.g. --set log_retention_days=90",
    )
    parser.add_argument(
        "--unset", action="append", default=[], metavar="KEY", help="forget a value: its default applies"
    )
    parser.add_argument(
        "--file", default=CONTEXT_FILE, help=f"the context file (default: ./{CONTEXT_FILE}, next to cdk.json)"
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="change nothing; exit 1 unless the file names a stage and every value is valid (make deploy)",
    )


def run_configure(args: argparse.Namespace, out: TextIO) -> int:
    path = Path(args.file)
    changes: dict[str, object | None] = {
        name: getattr(args, name) for name in _NAMED if getattr(args, name) is not None
    }
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or not key:
            out.write(f"--set {item}: expected KEY=VALUE\n")
            return EXIT_PROBLEMS
        changes[key.strip()] = value
    changes.update(dict.fromkeys(args.unset))
    try:
        if args.check:
            if changes:
                out.write("--check changes nothing: run without it to set values\n")
                return EXIT_PROBLEMS
            context = read_context(path)
            settings = DeploymentSettings.from_mapping(context)
        else:
            settings = configure(path, changes)
            context = read_context(path)
    except (SettingsError, ConfigurationError) as exc:
        out.write(f"{exc}\n")
        return EXIT_PROBLEMS
    if args.check and "stage" not in context:
        out.write(
            f"{path} names no stage: choose one with `squadron configure --stage NAME` (the stack is "
            "Squadron-<stage>), so that every deploy deploys the same stack\n"
        )
        return EXIT_PROBLEMS
    out.write(describe(settings, context, path))
    return EXIT_OK


def describe(settings: DeploymentSettings, context: dict[str, object], path: Path) -> str:
    """Every deployment value, one a line, each saying whether it is kept in ``path`` or a default."""
    width = max(len(name) for name in DeploymentSettings.model_fields)
    lines = [
        f"{name:<{width}}  {value if value is not None else '-'}{'' if name in context else '  (default)'}"
        for name, value in settings.model_dump().items()
    ]
    lines.append(f"kept in {path}: `make deploy` deploys {settings.stack_name} with these values")
    if not settings.app_configured:
        lines.append(
            "github_app_id is 0: the stack waits for its App (squadron app create --stack keeps the App's "
            "id and slug here once it exists; then make deploy again)"
        )
    return "\n".join(lines) + "\n"


# --- doctor ------------------------------------------------------------------------------------


def configure_doctor(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--file", default=CONTEXT_FILE, help=f"the deployment's values (default: ./{CONTEXT_FILE})"
    )
    parser.add_argument(
        "--before-deploy",
        action="store_true",
        help="exit 1 only for what would make `cdk deploy` fail (make deploy runs it so)",
    )
    parser.add_argument(
        "--template",
        help="the synthesized template the Lambda concurrency budget is read from "
        "(default: cdk.out/Squadron-<stage>.template.json next to --file; make deploy synthesizes it first)",
    )
    parser.add_argument(
        "--installed-on",
        action="append",
        default=[],
        type=repo_name,
        metavar="OWNER/NAME",
        help="a repository the App must be installed on, with every permission accepted (repeatable)",
    )
    parser.add_argument(
        "--github-api-url",
        default=GITHUB_API_URL,
        help=f"GitHub's API, asked as the App (default: {GITHUB_API_URL}; GitHub Enterprise: https://HOST/api/v3)",
    )
    parser.add_argument("--docker", default="docker", help=argparse.SUPPRESS)


def run_doctor(args: argparse.Namespace, out: TextIO) -> int:
    from squadron.adapters.preflight import AwsFacts  # noqa: PLC0415 (boto3, lazily)

    path = Path(args.file)
    try:
        settings = DeploymentSettings.from_mapping(saved_values(path.parent, context_file=path))
        region = deployed(path, environ=os.environ, home=Path.home()).region  # where cdk deploys it
    except (SettingsError, ConfigurationError) as exc:
        out.write(f"missing deployment values: {exc}\n")
        return EXIT_PROBLEMS
    template = Path(args.template) if args.template else synthesized_template(path.parent, settings)
    github = GitHubCheck(api_url=args.github_api_url, repositories=tuple(args.installed_on))
    findings = doctor(settings, AwsFacts(region=region), docker=args.docker, template=template, github=github)
    for finding in findings:
        out.write(finding.line + "\n")
        out.flush()
    problems = failed(findings, before_deploy=args.before_deploy)
    if problems:
        out.write(f"{len(problems)} missing: {', '.join(p.check for p in problems)}\n")
        return EXIT_PROBLEMS
    out.write("nothing missing\n" if not failed(findings) else "nothing missing for a deploy\n")
    return EXIT_OK


def synthesized_template(directory: Path, settings: DeploymentSettings) -> Path:
    """Where `cdk synth`, run in ``directory``, writes the stage's template."""
    return directory / "cdk.out" / f"{settings.stack_name}.template.json"


def read_budget(template: Path) -> ConcurrencyBudget:
    """The Lambda concurrency budget of the synthesized ``template``; PreflightError when unreadable."""
    from squadron.adapters.preflight import PreflightError  # noqa: PLC0415

    try:
        return concurrency_budget(json.loads(template.read_text()))
    except FileNotFoundError as exc:
        raise PreflightError(
            f"no synthesized template at {template}: npx cdk synth (make deploy does)"
        ) from exc
    except (OSError, ValueError, AttributeError) as exc:
        raise PreflightError(f"{template} is not a synthesized template: {exc}") from exc


@dataclass(frozen=True)
class GitHubCheck:
    """Where the doctor asks GitHub as the App, and the repositories it must be installed on."""

    api_url: str = GITHUB_API_URL
    repositories: tuple[str, ...] = ()
    #: An httpx transport (tests: none means the network).
    transport: Any = None


def doctor(
    settings: DeploymentSettings,
    aws: AwsFacts,
    *,
    docker: str = "docker",
    template: Path | None = None,
    github: GitHubCheck | None = None,
) -> list[Finding]:
    """Every check, in the order a deploy meets them: the account, CDK, quotas, Docker, the App,
    then the deployed stack's secrets and webhook URL, then the App as GitHub knows it (signed in
    with the stored key)."""
    from squadron.adapters.preflight import PreflightError, docker_version  # noqa: PLC0415

    findings: list[Finding] = []
    try:
        identity = aws.identity()
    except PreflightError as exc:
        findings.append(Finding("missing", "AWS credentials", str(exc), blocks_deploy=True))
        return [*findings, *_app(settings), Finding("skip", "the rest", "needs AWS credentials")]
    if settings.account and settings.account != identity.account:
        findings.append(
            Finding(
                "missing",
                "AWS credentials",
                f"they are account {identity.account}'s, the deployment's is {settings.account}",
                blocks_deploy=True,
            )
        )
    else:
        findings.append(Finding("ok", "AWS credentials", f"{identity.arn} in {identity.region}"))

    def read(check: str, judge: Callable[[], Finding], *, blocks: bool) -> None:
        try:
            findings.append(judge())
        except PreflightError as exc:
            findings.append(
                Finding("missing" if blocks else "warn", check, f"could not be read: {exc}", blocks)
            )

    read(
        "CDK bootstrap",
        lambda: judge_bootstrap(aws.bootstrap_version(), identity.account, identity.region),
        blocks=True,
    )
    try:
        vcpus: float | None = aws.fargate_vcpus()
        vcpus_unread = ""
    except PreflightError as exc:
        vcpus, vcpus_unread = None, str(exc)
    agents = None if vcpus is None else int(vcpus // AGENT_TASK_VCPUS)
    where = template or synthesized_template(Path.cwd(), settings)
    read(
        "Lambda concurrency",
        lambda: judge_lambda_concurrency(*aws.lambda_concurrency(), read_budget(where), agents),
        blocks=False,
    )
    if vcpus_unread:
        findings.append(Finding("warn", "Fargate vCPU quota", f"could not be read: {vcpus_unread}"))
    else:
        findings.append(judge_fargate(vcpus, AGENT_TASK_VCPUS))
    read("ECS service role", lambda: judge_ecs_service_role(aws.has_role(ECS_SERVICE_ROLE)), blocks=False)
    try:
        findings.append(Finding("ok", "Docker", f"engine {docker_version(docker)} (builds the agent image)"))
    except PreflightError as exc:
        findings.append(
            Finding(
                "missing", "Docker", f"{exc}: `cdk deploy` builds the agent image with it", blocks_deploy=True
            )
        )
    findings += _app(settings)
    try:
        outputs = aws.stack_outputs(settings.stack_name)
    except PreflightError as exc:
        findings.append(Finding("warn", "stack", f"{settings.stack_name} could not be read: {exc}"))
        return findings
    if outputs is None:
        findings.append(
            Finding(
                "skip", "secrets and webhook URL", f"{settings.stack_name} is not deployed yet (make deploy)"
            )
        )
        return findings
    findings += _stack(settings, outputs, aws, github or GitHubCheck())
    return findings


def _app(settings: DeploymentSettings) -> list[Finding]:
    if not settings.app_configured:
        return [
            Finding(
                "missing",
                "GitHub App",
                "github_app_id is 0: the stack waits for its App (fine for the first deploy); create it (squadron app create --webhook-url "
                f"<WebhookUrl> --stack {settings.stack_name}), then make deploy",
            )
        ]
    login = app_bot_login(settings.github_app_slug)
    return [Finding("ok", "GitHub App", f"id {settings.github_app_id}, acting as {login}")]


def _stack(
    settings: DeploymentSettings, outputs: dict[str, str], aws: AwsFacts, github: GitHubCheck
) -> list[Finding]:
    from squadron.adapters.preflight import PreflightError, webhook_answer  # noqa: PLC0415

    findings: list[Finding] = []
    values: dict[str, str] = {}
    deployed_app = outputs.get("GitHubAppId")
    if deployed_app is not None and deployed_app != settings.github_app_id:
        findings.append(
            Finding(
                "missing",
                "deployed App",
                f"{settings.stack_name} runs with github_app_id {deployed_app}, the deployment says "
                f"{settings.github_app_id}: make deploy",
            )
        )
    kept = app_key_directory(settings.stage, environ=os.environ, home=Path.home()) / APP_PRIVATE_KEY_FILE
    for output, judge in (
        (
            "GitHubAppPrivateKeySecretName",
            lambda value, secret: judge_private_key(value, secret, str(kept) if kept.is_file() else None),
        ),
        ("WebhookSecretName", judge_webhook_secret),
        ("CopilotTokenSecretName", judge_copilot_token),
    ):
        secret = outputs.get(output)
        if secret is None:
            findings.append(
                Finding("missing", output, f"{settings.stack_name} has no such output: make deploy")
            )
            continue
        try:
            values[output] = aws.secret_value(secret)
            findings.append(judge(values[output], secret))
        except PreflightError as exc:
            findings.append(Finding("missing", output, f"{secret} could not be read: {exc}"))
    url = outputs.get("WebhookUrl")
    if url is None:
        findings.append(Finding("missing", "webhook URL", f"{settings.stack_name} has no output WebhookUrl"))
        return findings
    try:
        status, reason = webhook_answer(url)
    except PreflightError as exc:
        findings.append(judge_webhook(url, None, str(exc)))
    else:
        findings.append(judge_webhook(url, status, reason))
    findings += _app_as_github_knows_it(
        settings, outputs=outputs, aws=aws, github=github, values=values, webhook_url=url
    )
    return findings


def _app_as_github_knows_it(
    settings: DeploymentSettings,
    *,
    outputs: dict[str, str],
    aws: AwsFacts,
    github: GitHubCheck,
    values: dict[str, str],
    webhook_url: str,
) -> list[Finding]:
    """Sign in as the App with the key the stack holds and ask GitHub what the App is, where it is
    installed and where its webhook goes (squadron.domain.app_check judges the answers)."""
    from squadron.adapters.app_probe import AppProbe, AppRefused  # noqa: PLC0415
    from squadron.adapters.preflight import PreflightError  # noqa: PLC0415

    key_secret = outputs.get("GitHubAppPrivateKeySecretName", "the private key's secret")
    key = values.get("GitHubAppPrivateKeySecretName", "")
    if not settings.app_configured or not key or judge_private_key(key, key_secret).status != "ok":
        return [Finding("skip", "the App on GitHub", "needs the App's id and its PEM key in the stack")]
    wanted, events = app_permissions(), app_events()
    findings: list[Finding] = []
    try:
        with AppProbe(
            api_url=github.api_url, app_id=settings.github_app_id, private_key=key, transport=github.transport
        ) as probe:
            try:
                seen = probe.app()
            except AppRefused as exc:
                findings.append(
                    judge_identity(
                        settings.github_app_id, settings.github_app_slug, None, str(exc), key_secret
                    )
                )
                return findings
            identity = judge_identity(settings.github_app_id, settings.github_app_slug, seen, "", key_secret)
            findings.append(identity)
            if identity.status != "ok":
                return findings
            findings.append(judge_grants(seen, wanted, events))
            for repository in github.repositories:
                findings.append(judge_installation(repository, probe.installation(repository), wanted))
            secret = outputs.get("WebhookSecretName", "the webhook secret")
            findings.append(
                judge_hook(
                    probe.hook(),
                    webhook_url,
                    probe.deliveries(),
                    secret=secret,
                    generated=aws.secret_generated(secret),
                )
            )
    except PreflightError as exc:
        findings.append(Finding("missing", "the App on GitHub", f"could not be asked: {exc}"))
    return findings
