"""What `squadron doctor` reads from AWS, Docker and the deployed webhook URL.

Every read returns plain facts; what cannot be read is a :class:`PreflightError` whose message
says why in one line (the doctor prints it as that check's finding). Clients are built lazily
from one boto3 session, so tests can inject their own (moto, or botocore's Stubber where moto
does not implement the API: Lambda's GetAccountSettings, Service Quotas for Fargate).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from dataclasses import dataclass
from typing import Any

import boto3
import httpx
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError

from squadron.domain.preflight import BOOTSTRAP_VERSION_PARAMETER, FARGATE_VCPU_QUOTA
from squadron.errors import SquadronError

DOCKER_TIMEOUT_SECONDS = 20
WEBHOOK_TIMEOUT_SECONDS = 10


class PreflightError(SquadronError):
    """A fact the doctor could not read; the message says why."""


def _why(exc: Exception) -> str:
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        return f"{error.get('Code', 'error')}: {error.get('Message', str(exc))}"
    return str(exc)


@dataclass(frozen=True)
class Identity:
    account: str
    arn: str
    region: str


class AwsFacts:
    """The account, bootstrap, quotas and the deployed stack, read with boto3's credentials."""

    def __init__(self, *, region: str | None = None, clients: dict[str, Any] | None = None) -> None:
        self._session = boto3.session.Session(region_name=region)
        self._clients = dict(clients or {})

    def client(self, service: str) -> Any:
        if service not in self._clients:
            self._clients[service] = self._session.client(service)  # type: ignore[call-overload]
        return self._clients[service]

    def _call(self, service: str, operation: str, **kwargs: Any) -> Any:
        try:
            return getattr(self.client(service), operation)(**kwargs)
        except NoRegionError as exc:
            raise PreflightError("no AWS region: set AWS_REGION or squadron configure --region") from exc
        except NoCredentialsError as exc:
            raise PreflightError("no AWS credentials: aws configure, or AWS_PROFILE") from exc
        except (ClientError, BotoCoreError) as exc:
            raise PreflightError(_why(exc)) from exc

    def identity(self) -> Identity:
        answer = self._call("sts", "get_caller_identity")
        region = self.client("sts").meta.region_name
        return Identity(account=str(answer["Account"]), arn=str(answer["Arn"]), region=str(region))

    def bootstrap_version(self) -> int | None:
        """The CDK bootstrap version of this account and region (None: not bootstrapped)."""
        try:
            answer = self.client("ssm").get_parameter(Name=BOOTSTRAP_VERSION_PARAMETER)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ParameterNotFound":
                return None
            raise PreflightError(_why(exc)) from exc
        except BotoCoreError as exc:
            raise PreflightError(_why(exc)) from exc
        return int(answer["Parameter"]["Value"])

    def lambda_concurrency(self) -> tuple[int, int]:
        """(the account's concurrent executions quota, the part no function reserves)."""
        limits = self._call("lambda", "get_account_settings")["AccountLimit"]
        return int(limits["ConcurrentExecutions"]), int(limits["UnreservedConcurrentExecutions"])

    def fargate_vcpus(self) -> float:
        """The account's Fargate On-Demand vCPU quota (its applied value, else AWS's default)."""
        service, code = FARGATE_VCPU_QUOTA
        try:
            answer = self.client("service-quotas").get_service_quota(ServiceCode=service, QuotaCode=code)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "NoSuchResourceException":
                raise PreflightError(_why(exc)) from exc
            answer = self._call(
                "service-quotas", "get_aws_default_service_quota", ServiceCode=service, QuotaCode=code
            )
        except BotoCoreError as exc:
            raise PreflightError(_why(exc)) from exc
        return float(answer["Quota"]["Value"])

    def has_role(self, name: str) -> bool:
        """Whether the account has the IAM role ``name`` (a service-linked role, say)."""
        try:
            self.client("iam").get_role(RoleName=name)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "NoSuchEntity":
                return False
            raise PreflightError(_why(exc)) from exc
        except BotoCoreError as exc:
            raise PreflightError(_why(exc)) from exc
        return True

    def stack_outputs(self, stack_name: str) -> dict[str, str] | None:
        """The deployed stack's outputs (None: no such stack yet)."""
        try:
            stacks = self.client("cloudformation").describe_stacks(StackName=stack_name)["Stacks"]
        except ClientError as exc:
            if "does not exist" in _why(exc):
                return None
            raise PreflightError(_why(exc)) from exc
        except BotoCoreError as exc:
            raise PreflightError(_why(exc)) from exc
        return {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])}

    def secret_generated(self, secret_id: str) -> bool:
        """Whether ``secret_id`` holds only the value it was created with (the stack's generated
        placeholder): no value was stored in it since."""
        versions = self._call("secretsmanager", "list_secret_version_ids", SecretId=secret_id)["Versions"]
        return len(versions) <= 1

    def secret_value(self, secret_id: str) -> str:
        return str(
            self._call("secretsmanager", "get_secret_value", SecretId=secret_id).get("SecretString", "")
        )


def docker_version(command: str = "docker") -> str:
    """The version of the Docker engine that answers (the agent image is built with it)."""
    path = shutil.which(command)
    if path is None:
        raise PreflightError(f"no `{command}` command on PATH")
    try:
        done = subprocess.run(  # noqa: S603 (a fixed command found on PATH)
            [path, "version", "--format", "{{.Server.Version}}"],
            capture_output=True,
            text=True,
            timeout=DOCKER_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PreflightError(f"`{command} version` failed: {exc}") from exc
    if done.returncode != 0 or not done.stdout.strip():
        said = (done.stderr.strip().splitlines() or ["no answer"])[-1]
        raise PreflightError(f"the Docker engine does not answer: {said}")
    return done.stdout.strip()


def webhook_answer(url: str, *, transport: httpx.BaseTransport | None = None) -> tuple[int, str]:
    """(status, the ingress's reason) for an unsigned ping to the webhook URL; PreflightError when
    nothing answers."""
    body = json.dumps({"zen": "squadron doctor", "hook_id": 0}).encode()
    headers = {
        "X-GitHub-Event": "ping",
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "Content-Type": "application/json",
        "User-Agent": "squadron-doctor",
    }
    try:
        with httpx.Client(timeout=WEBHOOK_TIMEOUT_SECONDS, transport=transport) as client:
            answer = client.post(url, content=body, headers=headers)
    except httpx.HTTPError as exc:
        raise PreflightError(str(exc) or type(exc).__name__) from exc
    try:
        reason = str(answer.json().get("reason") or answer.json().get("message") or "")
    except (ValueError, AttributeError):
        reason = answer.text[:200]
    return answer.status_code, reason
