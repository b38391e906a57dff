"""Each repository's EFS access point and agent task definition, made at its first launch.

:meth:`RepoTaskDefinitions.task_definition` answers the task definition a repository's agent
tasks run: ``<family>-repo-<repo id>`` (:mod:`squadron.domain.repo_volumes`), a copy of the
deployment's agent task definition whose one volume is the repository's own access point (root
``/repos/<repo id>``, created by EFS owned by root, mode 0711). Kept as the retrospective
schedules are: found or made idempotently, named from the repository id, remembered by a warm
container; made by the launcher when a repository's first agent starts (the router launches).

Idempotent: the access point is looked up by its client token before it is created (with that
token, so two routers racing make one); a task definition found for the family is reused only
if its volume is the repository's access point, otherwise a new revision replaces it. Two
routers racing register two identical revisions, both of which mount the same access point.

Limits: 10,000 access points per file system (EFS, "Creating access points"), so at most that
many repositories per deployment; ECS keeps up to 1,000,000 revisions per family.
"""

from __future__ import annotations

import threading
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from squadron.adapters.errors import AdapterError
from squadron.domain.repo_volumes import (
    REPO_TAG,
    ROOT_OWNER_GID,
    ROOT_OWNER_UID,
    ROOT_PERMISSIONS,
    access_point_token,
    repo_family,
    repo_root_path,
)

#: What RegisterTaskDefinition takes of a described task definition (the rest is ECS's own).
_COPIED = (
    "containerDefinitions",
    "taskRoleArn",
    "executionRoleArn",
    "networkMode",
    "requiresCompatibilities",
    "cpu",
    "memory",
    "runtimePlatform",
    "ephemeralStorage",
    "pidMode",
    "ipcMode",
)


class RepoVolumeError(AdapterError):
    """EFS or ECS did not give a repository its access point or task definition."""


class RepoTaskDefinitions:
    def __init__(
        self,
        *,
        file_system_id: str,
        base_task_definition: str,
        volume_name: str = "agents",
        efs: Any = None,
        ecs: Any = None,
    ) -> None:
        self.file_system_id = file_system_id
        self.base_task_definition = base_task_definition
        self.volume_name = volume_name
        self._efs = efs
        self._ecs = ecs
        #: Repository id -> the task definition ARN found or made for it by this container.
        self._known: dict[int, str] = {}
        self._lock = threading.Lock()

    @property
    def efs(self) -> Any:
        if self._efs is None:
            self._efs = boto3.client("efs")
        return self._efs

    @property
    def ecs(self) -> Any:
        if self._ecs is None:
            self._ecs = boto3.client("ecs")
        return self._ecs

    def _call(self, client: Any, operation: str, **kwargs: Any) -> Any:
        try:
            return getattr(client, operation)(**kwargs)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            raise RepoVolumeError(
                f"{operation} failed: {error.get('Message', exc)}", code=error.get("Code")
            ) from exc
        except BotoCoreError as exc:
            raise RepoVolumeError(f"{operation} failed: {exc}") from exc

    def task_definition(self, repo_id: int) -> str:
        """The ARN of the task definition that mounts only ``repo_id``'s access point."""
        with self._lock:
            known = self._known.get(repo_id)
        if known is not None:
            return known
        access_point = self.access_point(repo_id)
        family = repo_family(self._base_family(), repo_id)
        held = self._held(family)
        if held is not None and self._mounts(held) == access_point:
            arn = str(held["taskDefinitionArn"])
        else:
            arn = self._register(family, repo_id, access_point)
        with self._lock:
            self._known[repo_id] = arn
        return arn

    def access_point(self, repo_id: int) -> str:
        """The id of ``repo_id``'s access point, created (root ``/repos/<id>``) if it has none."""
        token = access_point_token(self.file_system_id, repo_id)
        root = repo_root_path(repo_id)
        for point in self._access_points():
            if point.get("ClientToken") == token:
                if point.get("RootDirectory", {}).get("Path") != root:  # made by hand
                    raise RepoVolumeError(
                        f"access point {point['AccessPointId']} has the token of {root} elsewhere"
                    )
                return str(point["AccessPointId"])
        created = self._call(
            self.efs,
            "create_access_point",
            ClientToken=token,
            FileSystemId=self.file_system_id,
            RootDirectory={
                "Path": root,
                "CreationInfo": {
                    "OwnerUid": ROOT_OWNER_UID,
                    "OwnerGid": ROOT_OWNER_GID,
                    "Permissions": ROOT_PERMISSIONS,
                },
            },
            Tags=[
                {"Key": REPO_TAG, "Value": str(repo_id)},
                {"Key": "Name", "Value": f"squadron repo {repo_id}"},
            ],
        )
        return str(created["AccessPointId"])

    def _access_points(self) -> list[dict[str, Any]]:
        points: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"FileSystemId": self.file_system_id}
        while True:
            page = self._call(self.efs, "describe_access_points", **kwargs)
            points.extend(page.get("AccessPoints", []))
            token = page.get("NextToken")
            if not token:
                return points
            kwargs["NextToken"] = token

    def _base_family(self) -> str:
        # An ARN (arn:...:task-definition/family:revision) or family[:revision].
        return self.base_task_definition.rsplit("/", 1)[-1].split(":", 1)[0]

    def _held(self, family: str) -> dict[str, Any] | None:
        try:
            answer = self.ecs.describe_task_definition(taskDefinition=family)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("ClientException", "InvalidParameterException"):
                return None  # no such family yet
            raise RepoVolumeError(f"describe_task_definition failed: {exc}") from exc
        except BotoCoreError as exc:
            raise RepoVolumeError(f"describe_task_definition failed: {exc}") from exc
        definition: dict[str, Any] = answer["taskDefinition"]
        return definition if definition.get("status") == "ACTIVE" else None

    def _mounts(self, definition: dict[str, Any]) -> str | None:
        """The access point of the definition's volume, if it has exactly the one volume."""
        volumes = definition.get("volumes") or []
        if len(volumes) != 1 or volumes[0].get("name") != self.volume_name:
            return None
        efs = volumes[0].get("efsVolumeConfiguration") or {}
        if efs.get("fileSystemId") != self.file_system_id or efs.get("rootDirectory", "/") != "/":
            return None
        authorization = efs.get("authorizationConfig") or {}
        point = authorization.get("accessPointId")
        return str(point) if point and authorization.get("iam") == "ENABLED" else None

    def _register(self, family: str, repo_id: int, access_point: str) -> str:
        base = self._call(self.ecs, "describe_task_definition", taskDefinition=self.base_task_definition)
        definition = base["taskDefinition"]
        request = {key: definition[key] for key in _COPIED if definition.get(key) is not None}
        request["family"] = family
        request["volumes"] = [
            {
                "name": self.volume_name,
                "efsVolumeConfiguration": {
                    "fileSystemId": self.file_system_id,
                    "transitEncryption": "ENABLED",
                    "authorizationConfig": {"accessPointId": access_point, "iam": "ENABLED"},
                },
            }
        ]
        request["tags"] = [{"key": REPO_TAG, "value": str(repo_id)}]
        registered = self._call(self.ecs, "register_task_definition", **request)
        return str(registered["taskDefinition"]["taskDefinitionArn"])
