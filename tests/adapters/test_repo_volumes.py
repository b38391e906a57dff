"""Each repository's access point and task definition, on moto's EFS and ECS.

The attacker here is a bug (or a hijacked agent's data) that names another repository's files:
a task of one repository must mount nothing but that repository's root, so what it can reach on
the file system is its own repository's agents' state, whatever path it asks for.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from squadron.adapters.ecs import EcsTaskLauncher, TaskLaunchError
from squadron.adapters.repo_volumes import RepoTaskDefinitions
from squadron.domain.repo_volumes import REPO_TAG, repo_family
from tests.support.aws import agent_compute

SECRET = "s3cret-" + "x" * 40


@pytest.fixture
def aws() -> Iterator[dict[str, Any]]:
    with mock_aws():
        compute = agent_compute()
        efs = boto3.client("efs")
        file_system = efs.create_file_system(CreationToken="agents", Encrypted=True)["FileSystemId"]
        ecs = boto3.client("ecs")
        yield {
            "efs": efs,
            "ecs": ecs,
            "file_system": file_system,
            "compute": compute,
            "definitions": RepoTaskDefinitions(
                file_system_id=file_system, base_task_definition=compute.task_definition, efs=efs, ecs=ecs
            ),
        }


def _volumes(ecs: Any, arn: str) -> list[dict[str, Any]]:
    volumes: list[dict[str, Any]] = ecs.describe_task_definition(taskDefinition=arn)["taskDefinition"][
        "volumes"
    ]
    return volumes


def _access_point(efs: Any, point: str) -> dict[str, Any]:
    (found,) = efs.describe_access_points(AccessPointId=point)["AccessPoints"]
    return dict(found)


def test_a_repositorys_task_definition_mounts_only_its_own_root(aws: dict[str, Any]) -> None:
    arn = aws["definitions"].task_definition(1296269)

    definition = aws["ecs"].describe_task_definition(taskDefinition=arn, include=["TAGS"])
    assert definition["taskDefinition"]["family"] == repo_family("agent", 1296269)
    (volume,) = _volumes(aws["ecs"], arn)  # one volume: nothing else of the file system
    efs = volume["efsVolumeConfiguration"]
    assert efs["fileSystemId"] == aws["file_system"]
    assert efs.get("rootDirectory", "/") == "/"  # the access point's root is the task's root
    assert efs["transitEncryption"] == "ENABLED"
    assert efs["authorizationConfig"]["iam"] == "ENABLED"
    point = _access_point(aws["efs"], efs["authorizationConfig"]["accessPointId"])
    assert point["FileSystemId"] == aws["file_system"]
    assert point["RootDirectory"]["Path"] == "/repos/1296269"
    # EFS creates the root owned by root, passable but not listable by agents' users.
    assert point["RootDirectory"]["CreationInfo"] == {"OwnerUid": 0, "OwnerGid": 0, "Permissions": "711"}
    # No enforced POSIX user: each agent's own uid keeps agents of the repository apart.
    assert "PosixUser" not in point
    assert {t["Key"]: t["Value"] for t in point["Tags"]}[REPO_TAG] == "1296269"
    assert {t["key"]: t["value"] for t in definition["tags"]}[REPO_TAG] == "1296269"
    # The rest is the deployment's agent task definition.
    base = aws["ecs"].describe_task_definition(taskDefinition=aws["compute"].task_definition)[
        "taskDefinition"
    ]
    copied = definition["taskDefinition"]
    for key in ("containerDefinitions", "networkMode", "requiresCompatibilities", "cpu", "memory"):
        assert copied[key] == base[key]


def test_two_repositories_never_share_an_access_point_or_a_task_definition(aws: dict[str, Any]) -> None:
    first, second = aws["definitions"].task_definition(1), aws["definitions"].task_definition(2)

    assert first != second
    (one,), (two,) = _volumes(aws["ecs"], first), _volumes(aws["ecs"], second)
    points = [v["efsVolumeConfiguration"]["authorizationConfig"]["accessPointId"] for v in (one, two)]
    assert points[0] != points[1]
    roots = [_access_point(aws["efs"], p)["RootDirectory"]["Path"] for p in points]
    assert roots == ["/repos/1", "/repos/2"]


def test_made_once_then_reused_by_this_container_and_by_a_cold_one(aws: dict[str, Any]) -> None:
    calls: list[str] = []
    for client in (aws["efs"], aws["ecs"]):
        client.meta.events.register(
            "before-call.*.*", lambda model, **_: calls.append(model.name), unique_id=f"count-{id(client)}"
        )
    first = aws["definitions"].task_definition(7)
    assert calls.count("CreateAccessPoint") == 1 and calls.count("RegisterTaskDefinition") == 1

    calls.clear()
    assert aws["definitions"].task_definition(7) == first
    assert calls == []  # remembered: no call at all

    cold = RepoTaskDefinitions(
        file_system_id=aws["file_system"],
        base_task_definition=aws["compute"].task_definition,
        efs=aws["efs"],
        ecs=aws["ecs"],
    )
    assert cold.task_definition(7) == first  # found, not made again
    assert "CreateAccessPoint" not in calls and "RegisterTaskDefinition" not in calls
    assert len(aws["efs"].describe_access_points(FileSystemId=aws["file_system"])["AccessPoints"]) == 1


def test_a_family_whose_volume_is_not_the_repositorys_gets_a_new_revision(aws: dict[str, Any]) -> None:
    """Someone registered the family by hand with another repository's access point (or the
    whole file system): the launcher does not run it, it registers the repository's own."""
    other = aws["definitions"].access_point(8)
    aws["ecs"].register_task_definition(
        family=repo_family("agent", 9),
        requiresCompatibilities=["FARGATE"],
        networkMode="awsvpc",
        cpu="1024",
        memory="2048",
        containerDefinitions=[{"name": "agent", "image": "agent:latest", "memory": 2048}],
        volumes=[
            {
                "name": "agents",
                "efsVolumeConfiguration": {
                    "fileSystemId": aws["file_system"],
                    "transitEncryption": "ENABLED",
                    "authorizationConfig": {"accessPointId": other, "iam": "ENABLED"},
                },
            }
        ],
    )

    arn = aws["definitions"].task_definition(9)

    (volume,) = _volumes(aws["ecs"], arn)
    point = volume["efsVolumeConfiguration"]["authorizationConfig"]["accessPointId"]
    assert point != other
    assert _access_point(aws["efs"], point)["RootDirectory"]["Path"] == "/repos/9"
    assert arn.endswith(":2")


def test_the_launcher_runs_each_agent_on_its_repositorys_task_definition(aws: dict[str, Any]) -> None:
    compute = aws["compute"]
    launcher = EcsTaskLauncher(
        cluster="squadron",
        task_definition=compute.task_definition,
        container_name="agent",
        subnets=[compute.subnet],
        security_groups=[compute.security_group],
        client=aws["ecs"],
        task_definitions=aws["definitions"],
    )

    tasks = {
        agent: launcher.launch(agent, "start", f"{agent}-g1-l1", SECRET)
        for agent in ("11-3-dev", "11-pm", "12-3-dev")
    }

    described = aws["ecs"].describe_tasks(cluster="squadron", tasks=list(tasks.values()))["tasks"]
    definition_of = {t["taskArn"]: t["taskDefinitionArn"] for t in described}
    runs = {agent: definition_of[arn] for agent, arn in tasks.items()}
    assert runs["11-3-dev"] == runs["11-pm"] == aws["definitions"].task_definition(11)
    assert runs["12-3-dev"] == aws["definitions"].task_definition(12)
    assert runs["11-3-dev"] != runs["12-3-dev"]
    assert compute.task_definition not in runs.values()  # never the shared definition


def test_a_launch_without_its_repositorys_definition_fails_clearly(aws: dict[str, Any]) -> None:
    compute = aws["compute"]
    # The deployment's agent task definition is gone (deregistered by hand): nothing to copy.
    broken = RepoTaskDefinitions(
        file_system_id=aws["file_system"], base_task_definition="missing:1", efs=aws["efs"], ecs=aws["ecs"]
    )
    launcher = EcsTaskLauncher(
        cluster="squadron",
        task_definition=compute.task_definition,
        container_name="agent",
        subnets=[compute.subnet],
        security_groups=[compute.security_group],
        client=aws["ecs"],
        task_definitions=broken,
    )
    with pytest.raises(TaskLaunchError, match="no task definition for 5-1-dev's repository"):
        launcher.launch("5-1-dev", "start", "5-1-dev-g1-l1", SECRET)
    assert aws["ecs"].list_tasks(cluster="squadron")["taskArns"] == []  # nothing ran on the shared one
