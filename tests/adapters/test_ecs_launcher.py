"""The ECS Fargate launcher under moto: RunTask request shape, failures, idempotent stop."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from moto import mock_aws

from squadron.adapters.ecs import (
    AGENT_ID_ENV,
    LAUNCH_TOKEN_ENV,
    EcsTaskLauncher,
    EcsTaskStatus,
    TaskLaunchError,
    client_token,
)
from squadron.domain.launches import SECRET_ENV, secret_digest
from tests.support.aws import agent_compute

if TYPE_CHECKING:
    from mypy_boto3_ecs import ECSClient


@pytest.fixture
def ecs() -> Iterator[tuple[ECSClient, dict[str, Any]]]:
    with mock_aws():
        compute = agent_compute()
        client = boto3.client("ecs")
        yield (
            client,
            {
                "cluster": "squadron",
                "task_definition": compute.task_definition,
                "container_name": "agent",
                "subnets": [compute.subnet],
                "security_groups": [compute.security_group],
            },
        )


SECRET = "s3cret-" + "x" * 40


def test_launch_runs_one_tagged_task_that_knows_its_agent_and_alone_its_secret(
    ecs: tuple[ECSClient, dict[str, Any]],
) -> None:
    client, settings = ecs
    launcher = EcsTaskLauncher(client=client, **settings)
    requests: list[dict[str, Any]] = []
    client.meta.events.register(
        "provide-client-params.ecs.RunTask", lambda params, **_: requests.append(params)
    )

    arn = launcher.launch("1-38-feat-dev", "start", "1-38-feat-dev-g1-l1", SECRET)

    task = client.describe_tasks(cluster="squadron", tasks=[arn], include=["TAGS"])["tasks"][0]
    assert task["startedBy"] == "1-38-feat-dev-g1-l1"  # the launch: what a retry finds it by
    tags = {tag["key"]: tag["value"] for tag in task.get("tags", [])}
    assert tags["squadron:agent"] == "1-38-feat-dev"
    env = {e["name"]: e["value"] for e in task["overrides"]["containerOverrides"][0]["environment"]}
    assert env[AGENT_ID_ENV] == "1-38-feat-dev"
    assert env[LAUNCH_TOKEN_ENV] == "1-38-feat-dev-g1-l1"
    assert env[SECRET_ENV] == SECRET  # the task's own environment, and nowhere else in the request
    (request,) = requests
    outside = {k: v for k, v in request.items() if k != "overrides"}
    assert SECRET not in repr(outside) and secret_digest(SECRET) not in repr(outside)
    assert request["clientToken"] == client_token("1-38-feat-dev-g1-l1", SECRET)


def test_a_launch_armed_again_with_a_new_secret_has_a_new_client_token(
    ecs: tuple[ECSClient, dict[str, Any]],
) -> None:
    tokens = {client_token("1-38-feat-dev-g1-l1", s) for s in (SECRET, SECRET + "2")}
    assert len(tokens) == 2 and all(len(t) <= 64 for t in tokens)
    assert len(client_token("x" * 64, SECRET)) == 64


def test_stop_is_idempotent(ecs: tuple[ECSClient, dict[str, Any]]) -> None:
    client, settings = ecs
    launcher = EcsTaskLauncher(client=client, **settings)
    arn = launcher.launch("1-38-feat-dev", "start", "t1", SECRET)
    launcher.stop(arn, "issue closed")
    launcher.stop(arn, "issue closed")  # again: no error
    task = client.describe_tasks(cluster="squadron", tasks=[arn])["tasks"][0]
    assert task["desiredStatus"] == "STOPPED"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"cluster": "missing"}, "RunTask for 1-38-feat-dev failed"),
        ({"task_definition": "arn:aws:ecs:us-east-1:123456789012:task-definition/nope:1"}, "RunTask"),
    ],
    ids=["unknown cluster", "unknown task definition"],
)
def test_launch_failures_are_named_errors(
    ecs: tuple[ECSClient, dict[str, Any]], change: dict[str, Any], message: str
) -> None:
    client, settings = ecs
    launcher = EcsTaskLauncher(client=client, **{**settings, **change})
    with pytest.raises(TaskLaunchError, match=message):
        launcher.launch("1-38-feat-dev", "start", "t1", SECRET)


def test_a_response_without_tasks_is_a_failure() -> None:
    class NoCapacity:
        def run_task(self, **_: Any) -> dict[str, Any]:
            return {"tasks": [], "failures": [{"arn": "x", "reason": "RESOURCE:ENI", "detail": "no ENI"}]}

    launcher = EcsTaskLauncher(
        client=NoCapacity(),  # type: ignore[arg-type]
        cluster="c",
        task_definition="t",
        container_name="agent",
        subnets=["s"],
        security_groups=["g"],
    )
    with pytest.raises(TaskLaunchError, match="RESOURCE:ENI"):
        launcher.launch("1-38-feat-dev", "start", "t1", SECRET)


def test_network_is_required() -> None:
    with pytest.raises(ValueError, match="subnet"):
        EcsTaskLauncher(
            cluster="c", task_definition="t", container_name="a", subnets=[], security_groups=["g"]
        )


def test_task_status_tells_running_from_stopped_and_unknown_tasks(
    ecs: tuple[ECSClient, dict[str, Any]],
) -> None:
    client, settings = ecs
    launcher = EcsTaskLauncher(client=client, **settings)
    alive = launcher.launch("1-38-feat-dev", "start", "t1", SECRET)
    stopped = launcher.launch("1-39-feat-dev", "start", "t2", SECRET)
    launcher.stop(stopped, "issue closed")
    unknown = alive.rsplit("/", 1)[0] + "/0123456789abcdef"
    status = EcsTaskStatus(cluster="squadron", client=client)
    assert status.running([alive, stopped, unknown]) == frozenset({alive})
    assert status.running([]) == frozenset()


@pytest.mark.parametrize(
    ("public", "expected"), [(True, "ENABLED"), (False, "DISABLED")], ids=["public", "nat"]
)
def test_tasks_get_a_public_address_only_in_public_subnets(
    ecs: tuple[ECSClient, dict[str, Any]], public: bool, expected: str
) -> None:
    client, settings = ecs
    requests: list[dict[str, Any]] = []
    client.meta.events.register(
        "provide-client-params.ecs.RunTask", lambda params, **_: requests.append(params)
    )
    EcsTaskLauncher(client=client, assign_public_ip=public, **settings).launch(
        "1-38-feat-dev", "start", "t", SECRET
    )
    (request,) = requests
    assert request["networkConfiguration"]["awsvpcConfiguration"]["assignPublicIp"] == expected
