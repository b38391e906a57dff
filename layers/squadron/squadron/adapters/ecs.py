"""Agent tasks on ECS Fargate: the :class:`~squadron.ports.TaskLauncher` port.

``RunTask`` is called with a client token made of the launch token and a digest
of the launch's secret: ECS makes a retried call with the same client token
return the task it already started instead of starting a second one. Its
``startedBy`` is the launch token, so :meth:`EcsTaskLauncher.find` answers
which task of a launch is running (ListTasks by ``startedBy``, then
DescribeTasks): a retry whose RunTask answer was lost adopts that task instead
of arming the launch again (:mod:`squadron.shell.launching`; the client token
alone cannot: the retry no longer knows the secret, and a stopped task must not
be "found" again). The task learns who it is from environment overrides, and
its secret the same way: never in a tag, ``startedBy`` or the client token.

With ``task_definitions`` (on AWS), a task runs its repository's own task definition, which
mounts only that repository's access point (:mod:`squadron.adapters.repo_volumes`): made at the
repository's first launch, since RunTask cannot override volumes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from squadron.adapters.errors import AdapterError
from squadron.adapters.repo_volumes import RepoTaskDefinitions, RepoVolumeError
from squadron.domain.agents import parse_agent_id
from squadron.domain.launches import SECRET_ENV, secret_digest

if TYPE_CHECKING:
    from mypy_boto3_ecs import ECSClient

#: ECS limits: startedBy ≤ 128 characters (letters, digits, ``-``, ``_``, ``/``), clientToken ≤ 64,
#: stop reason ≤ 255; ListTasks answers at most 100 ARNs a page (a launch has one or two tasks).
_STARTED_BY_MAX = 128
_STARTED_BY_CHARS = re.compile(r"[^A-Za-z0-9_/-]")
_CLIENT_TOKEN_MAX = 64
_REASON_MAX = 255

AGENT_ID_ENV = "SQUADRON_AGENT_ID"
LAUNCH_PURPOSE_ENV = "SQUADRON_LAUNCH_PURPOSE"
LAUNCH_TOKEN_ENV = "SQUADRON_LAUNCH_TOKEN"  # noqa: S105 - a variable name, not a secret


class TaskLaunchError(AdapterError):
    """ECS did not start (or stop) an agent task."""


class EcsTaskLauncher:
    def __init__(
        self,
        *,
        cluster: str,
        task_definition: str,
        container_name: str,
        subnets: Sequence[str],
        security_groups: Sequence[str],
        assign_public_ip: bool = False,
        client: ECSClient | None = None,
        task_definitions: RepoTaskDefinitions | None = None,
    ) -> None:
        if not subnets or not security_groups:
            raise ValueError("agent tasks need at least one subnet and one security group")
        #: Tasks in public subnets (no NAT gateway) need a public address to reach GitHub.
        self.assign_public_ip = assign_public_ip
        self.cluster = cluster
        self.task_definition = task_definition
        self.container_name = container_name
        self.subnets = list(subnets)
        self.security_groups = list(security_groups)
        self._client = client
        #: Each repository's own task definition (None: every task runs ``task_definition``).
        self.task_definitions = task_definitions

    @property
    def client(self) -> ECSClient:
        if self._client is None:
            self._client = boto3.client("ecs")
        return self._client

    def _task_definition(self, agent_id: str) -> str:
        if self.task_definitions is None:
            return self.task_definition
        repo_id, _, _ = parse_agent_id(agent_id)
        try:
            return self.task_definitions.task_definition(repo_id)
        except RepoVolumeError as exc:
            raise TaskLaunchError(
                f"no task definition for {agent_id}'s repository: {exc}", code=exc.code
            ) from exc

    def launch(self, agent_id: str, purpose: str, token: str, secret: str) -> str:
        environment = [
            {"name": AGENT_ID_ENV, "value": agent_id},
            {"name": LAUNCH_PURPOSE_ENV, "value": purpose},
            {"name": LAUNCH_TOKEN_ENV, "value": token},
            {"name": SECRET_ENV, "value": secret},
        ]
        request: dict[str, Any] = {
            "cluster": self.cluster,
            "taskDefinition": self._task_definition(agent_id),
            "launchType": "FARGATE",
            "count": 1,
            "clientToken": client_token(token, secret),
            "startedBy": started_by(token),
            "networkConfiguration": {
                "awsvpcConfiguration": {
                    "subnets": self.subnets,
                    "securityGroups": self.security_groups,
                    "assignPublicIp": "ENABLED" if self.assign_public_ip else "DISABLED",
                }
            },
            "overrides": {"containerOverrides": [{"name": self.container_name, "environment": environment}]},
            "tags": [
                {"key": "squadron:agent", "value": agent_id},
                {"key": "squadron:launch", "value": token},
            ],
            "enableECSManagedTags": True,
        }
        try:
            response = self.client.run_task(**request)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            raise TaskLaunchError(
                f"RunTask for {agent_id} failed: {error.get('Message', exc)}", code=error.get("Code")
            ) from exc
        except BotoCoreError as exc:
            raise TaskLaunchError(f"RunTask for {agent_id} failed: {exc}") from exc
        failures = response.get("failures") or []
        tasks = response.get("tasks") or []
        if failures or not tasks:
            why = "; ".join(f"{f.get('reason', '?')} ({f.get('detail', f.get('arn', ''))})" for f in failures)
            raise TaskLaunchError(f"RunTask for {agent_id} started no task: {why or 'no task returned'}")
        return tasks[0]["taskArn"]

    def find(self, token: str) -> str | None:
        """The newest task of launch ``token`` that has not stopped (None: there is none).

        ListTasks by ``startedBy`` (AWS lists tasks whose desired status is RUNNING, which
        includes those still PENDING; the moto stand-in lists stopped ones too), then
        DescribeTasks: a task ECS is stopping or has stopped is not adopted.
        """
        try:
            listed = self.client.list_tasks(cluster=self.cluster, startedBy=started_by(token), maxResults=100)
            arns = listed.get("taskArns") or []
            if not arns:
                return None
            described = self.client.describe_tasks(cluster=self.cluster, tasks=arns)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            raise TaskLaunchError(
                f"looking up the task of launch {token} failed: {error.get('Message', exc)}",
                code=error.get("Code"),
            ) from exc
        except BotoCoreError as exc:
            raise TaskLaunchError(f"looking up the task of launch {token} failed: {exc}") from exc
        live = [
            task
            for task in described.get("tasks", [])
            if task.get("lastStatus") not in ("STOPPED", "DEPROVISIONING", "DELETED")
            and task.get("desiredStatus") != "STOPPED"
        ]
        if not live:
            return None
        return max(live, key=_started_at)["taskArn"]

    def stop(self, task_arn: str, reason: str) -> None:
        try:
            self.client.stop_task(cluster=self.cluster, task=task_arn, reason=reason[:_REASON_MAX])
        except ClientError as exc:
            error = exc.response.get("Error", {})
            if _already_gone(error):
                return
            raise TaskLaunchError(
                f"StopTask {task_arn} failed: {error.get('Message', exc)}", code=error.get("Code")
            ) from exc
        except BotoCoreError as exc:
            raise TaskLaunchError(f"StopTask {task_arn} failed: {exc}") from exc


def _started_at(task: Any) -> tuple[float, str]:
    created = task.get("createdAt")
    return (created.timestamp() if created is not None else 0.0, task["taskArn"])


def started_by(token: str) -> str:
    """RunTask's ``startedBy`` (and ListTasks' filter): the launch token, in ECS's alphabet."""
    return _STARTED_BY_CHARS.sub("_", token)[-_STARTED_BY_MAX:]


def client_token(token: str, secret: str) -> str:
    """RunTask's idempotency token: the launch and which secret it was armed with (≤ 64 chars)."""
    return f"{token[-(_CLIENT_TOKEN_MAX - 9) :]}-{secret_digest(secret)[:8]}"


def _already_gone(error: Any) -> bool:
    """A task that no longer exists is as stopped as it gets (stop is idempotent)."""
    message = str(error.get("Message", "")).lower()
    return error.get("Code") in ("InvalidParameterException", "ClientException") and (
        "not found" in message or "cannot be found" in message or "stopped" in message
    )


class EcsTaskStatus:
    """Which agent tasks ECS still runs (the reconciler's check for dead tasks)."""

    #: DescribeTasks takes at most 100 tasks per call.
    BATCH = 100

    def __init__(self, *, cluster: str, client: ECSClient | None = None) -> None:
        self.cluster = cluster
        self._client = client

    @property
    def client(self) -> ECSClient:
        if self._client is None:
            self._client = boto3.client("ecs")
        return self._client

    def running(self, task_arns: Sequence[str]) -> frozenset[str]:
        """The ARNs among ``task_arns`` whose task has not stopped (pending and running count)."""
        alive: set[str] = set()
        arns = sorted(set(task_arns))
        for start in range(0, len(arns), self.BATCH):
            try:
                answer = self.client.describe_tasks(
                    cluster=self.cluster, tasks=arns[start : start + self.BATCH]
                )
            except (ClientError, BotoCoreError) as exc:
                raise TaskLaunchError(f"DescribeTasks on {self.cluster} failed: {exc}") from exc
            for task in answer.get("tasks", []):
                if (
                    task.get("lastStatus") not in ("STOPPED", "DELETED")
                    and task.get("desiredStatus") != "STOPPED"
                ):
                    alive.add(task["taskArn"])
        return frozenset(alive)
