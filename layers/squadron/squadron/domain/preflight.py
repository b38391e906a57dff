"""What a deploy needs, judged from what `squadron doctor` read — pure.

Each check ends in one :class:`Finding`: one line that says what is there, or what is missing
and what to do about it. ``blocks_deploy`` marks what would make `cdk deploy` fail (or leave a
stack that cannot start); the rest is what the running stack needs before it can work.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

Status = Literal["ok", "warn", "missing", "skip"]

#: Bootstrap version below which CDK's synthesized templates refuse to deploy (their
#: CheckBootstrapVersion rule rejects 1-5).
MIN_BOOTSTRAP_VERSION = 6
#: The default bootstrap qualifier, whose version CDK keeps in this SSM parameter.
BOOTSTRAP_VERSION_PARAMETER = "/cdk-bootstrap/hnb659fds/version"
#: Executions the functions other than the router need at once to answer: the ingress (GitHub
#: waits 10 s), the reconciler and the token vendor, one each.
OTHER_FUNCTIONS_CONCURRENCY = 3
#: Service Quotas: "Fargate On-Demand vCPU resource count"; Lambda's concurrent executions.
FARGATE_VCPU_QUOTA = ("fargate", "L-3032A538")
LAMBDA_CONCURRENCY_QUOTA = ("lambda", "L-B99A9384")
#: Below this many agents at once, a team's work queues up (a PM, a developer and a reviewer).
FEW_AGENTS = 3

_GITHUB_TOKEN = re.compile(r"^(gh[opusr]_[A-Za-z0-9_]{20,}|github_pat_[A-Za-z0-9_]{20,})$")
_PEM = re.compile(r"-----BEGIN (RSA )?PRIVATE KEY-----.+-----END (RSA )?PRIVATE KEY-----", re.S)


@dataclass(frozen=True)
class Finding:
    status: Status
    check: str
    detail: str
    blocks_deploy: bool = False

    @property
    def line(self) -> str:
        return f"{self.status:<7} {self.check}: {self.detail}"


def failed(findings: Iterable[Finding], *, before_deploy: bool = False) -> list[Finding]:
    """What is missing (before a deploy: only what would make it fail)."""
    return [f for f in findings if f.status == "missing" and (f.blocks_deploy or not before_deploy)]


def judge_bootstrap(version: int | None, account: str, region: str) -> Finding:
    bootstrap = f"npx cdk bootstrap aws://{account}/{region}"
    if version is None:
        return Finding(
            "missing",
            "CDK bootstrap",
            f"{region} is not bootstrapped (no {BOOTSTRAP_VERSION_PARAMETER}): {bootstrap}",
            True,
        )
    if version < MIN_BOOTSTRAP_VERSION:
        return Finding(
            "missing",
            "CDK bootstrap",
            f"version {version} in {region} is older than {MIN_BOOTSTRAP_VERSION}: {bootstrap} again",
            True,
        )
    return Finding("ok", "CDK bootstrap", f"version {version} in {region}")


def judge_lambda_concurrency(limit: int, unreserved: int, router_max: int) -> Finding:
    """The router may take ``router_max`` executions; the other functions must still find theirs."""
    needed = router_max + OTHER_FUNCTIONS_CONCURRENCY
    if unreserved >= needed:
        return Finding(
            "ok",
            "Lambda concurrency",
            f"{unreserved} of {limit} unreserved: the router takes at most {router_max}, the rest stays "
            "free for the ingress",
        )
    fits = unreserved - OTHER_FUNCTIONS_CONCURRENCY
    lower = (
        f"lower the router's share (squadron configure --set router_max_concurrency={fits}) or "
        if fits >= 2
        else ""
    )
    return Finding(
        "missing",
        "Lambda concurrency",
        f"{unreserved} of {limit} unreserved, {needed} needed (router_max_concurrency {router_max} + "
        f"{OTHER_FUNCTIONS_CONCURRENCY}): {lower}ask AWS for more (Service Quotas: lambda "
        f"{LAMBDA_CONCURRENCY_QUOTA[1]})",
        True,
    )


def judge_fargate(vcpus: float | None, task_vcpus: float) -> Finding:
    code = f"Service Quotas: fargate {FARGATE_VCPU_QUOTA[1]}"
    if vcpus is None:
        return Finding(
            "warn", "Fargate vCPU quota", f"could not be read ({code}); agents need {task_vcpus:g} vCPU each"
        )
    agents = int(vcpus // task_vcpus)
    if agents < 1:
        return Finding(
            "missing",
            "Fargate vCPU quota",
            f"{vcpus:g} vCPU: no agent task ({task_vcpus:g} vCPU) can start; ask AWS for more ({code})",
            True,
        )
    if agents < FEW_AGENTS:
        return Finding(
            "warn",
            "Fargate vCPU quota",
            f"{vcpus:g} vCPU: {agents} agent task(s) at once; more wait their turn ({code})",
        )
    return Finding("ok", "Fargate vCPU quota", f"{vcpus:g} vCPU: up to {agents} agent tasks at once")


def judge_private_key(value: str, secret: str) -> Finding:
    if _PEM.search(value):
        return Finding("ok", "App private key", f"{secret} holds a PEM private key")
    return Finding(
        "missing",
        "App private key",
        f"{secret} holds its placeholder, not a PEM key: squadron app create --stack ..., or "
        f"aws secretsmanager put-secret-value --secret-id {secret} --secret-string file://app.pem",
    )


def judge_webhook_secret(value: str, secret: str) -> Finding:
    if value.strip():
        return Finding("ok", "webhook secret", f"{secret} is set (the App's webhook must use the same)")
    return Finding("missing", "webhook secret", f"{secret} is empty: every webhook is refused")


def judge_copilot_token(value: str, secret: str) -> Finding:
    if _GITHUB_TOKEN.match(value.strip()):
        return Finding("ok", "Copilot token", f"{secret} holds a GitHub token")
    return Finding(
        "warn",
        "Copilot token",
        f"{secret} holds its placeholder: roles whose model Copilot serves cannot start (BYOK roles can); "
        f"aws secretsmanager put-secret-value --secret-id {secret} --secret-string <token with a Copilot seat>",
    )


def judge_webhook(url: str, status: int | None, reason: str) -> Finding:
    """An unsigned request must be refused by the ingress itself (401): the route, the function and
    its secret all work. Anything else says where it breaks."""
    if status == 401:
        return Finding("ok", "webhook URL", f"{url} answers (401 to an unsigned request, as it should)")
    if status is None:
        return Finding("missing", "webhook URL", f"{url} does not answer: {reason}")
    return Finding(
        "missing", "webhook URL", f"{url} answered {status} to an unsigned request (401 expected): {reason}"
    )
