"""What `squadron destroy` does in AWS before `cdk destroy`: stop the stack's agent tasks.

CloudFormation cannot delete an ECS cluster while tasks run on it ("The Cluster cannot be deleted
while Tasks are active"), nor the agents' subnets while a task's network interface is in one, so a
plain `cdk destroy` with agents at work fails half-way. This first stops what could start new
tasks (the stack's SQS event source mappings: the router; its scheduled rules: the reconciler),
then stops every task of the stack's cluster and waits until ECS says each one stopped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from squadron.adapters.preflight import AwsFacts, PreflightError

STOP_REASON = "squadron destroy: the stack is being deleted"


@dataclass
class Quiesced:
    """What was done: each a physical id."""

    mappings_disabled: list[str] = field(default_factory=list)
    rules_disabled: list[str] = field(default_factory=list)
    tasks_stopped: list[str] = field(default_factory=list)


def _resources(aws: AwsFacts, stack: str) -> Iterator[dict[str, Any]]:
    pages = aws.client("cloudformation").get_paginator("list_stack_resources").paginate(StackName=stack)
    for page in pages:
        yield from page["StackResourceSummaries"]


def _running(ecs: Any, cluster: str) -> list[str]:
    arns: list[str] = []
    for status in ("RUNNING", "PENDING"):
        for page in ecs.get_paginator("list_tasks").paginate(cluster=cluster, desiredStatus=status):
            arns += page["taskArns"]
    return arns


def quiesce(
    aws: AwsFacts, stack: str, *, stopped: Callable[[Any, str, list[str]], None] | None = None
) -> Quiesced:
    """Stop the stack's task launchers, then its tasks; returns when ECS reports them stopped.
    PreflightError when AWS refuses (the message says what)."""
    done = Quiesced()
    try:
        resources = list(_resources(aws, stack))
        clusters = [r["PhysicalResourceId"] for r in resources if r["ResourceType"] == "AWS::ECS::Cluster"]
        for resource in resources:
            kind, physical = resource["ResourceType"], resource.get("PhysicalResourceId")
            if not physical or resource.get("ResourceStatus", "").startswith("DELETE"):
                continue
            if kind == "AWS::Lambda::EventSourceMapping":
                aws.client("lambda").update_event_source_mapping(UUID=physical, Enabled=False)
                done.mappings_disabled.append(physical)
            elif kind == "AWS::Events::Rule":
                rule = aws.client("events").describe_rule(Name=physical.split("|")[-1])
                if "ScheduleExpression" in rule:
                    aws.client("events").disable_rule(
                        Name=rule["Name"], EventBusName=rule.get("EventBusName", "default")
                    )
                    done.rules_disabled.append(rule["Name"])
        ecs = aws.client("ecs")
        for cluster in clusters:
            tasks = _running(ecs, cluster)
            for task in tasks:
                ecs.stop_task(cluster=cluster, task=task, reason=STOP_REASON)
            done.tasks_stopped += tasks
            if tasks:
                (stopped or _wait_stopped)(ecs, cluster, tasks)
    except (ClientError, BotoCoreError) as exc:
        raise PreflightError(str(exc)) from exc
    return done


def _wait_stopped(ecs: Any, cluster: str, tasks: list[str]) -> None:
    for start in range(0, len(tasks), 100):  # DescribeTasks takes 100 at a time
        ecs.get_waiter("tasks_stopped").wait(
            cluster=cluster, tasks=tasks[start : start + 100], WaiterConfig={"Delay": 6, "MaxAttempts": 100}
        )
