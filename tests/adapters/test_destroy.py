"""`squadron destroy` on a stack whose agents are at work (moto): what launches tasks is stopped
first, every running task is stopped and seen stopped, and only then `cdk destroy` runs."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from squadron.cli import main

#: An image moto knows (its own examples use it).
EXAMPLE_AMI_ID = "ami-12c6146b"
ROLE_POLICY = {
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}
    ],
}
TEMPLATE: dict[str, Any] = {
    "Resources": {
        "Cluster": {"Type": "AWS::ECS::Cluster"},
        "Queue": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": "events.fifo", "FifoQueue": True}},
        "Role": {"Type": "AWS::IAM::Role", "Properties": {"AssumeRolePolicyDocument": ROLE_POLICY}},
        "Router": {
            "Type": "AWS::Lambda::Function",
            "Properties": {
                "Runtime": "python3.12",
                "Handler": "index.handler",
                "Role": {"Fn::GetAtt": ["Role", "Arn"]},
                "Code": {"ZipFile": "def handler(event, context):\n    return None\n"},
            },
        },
        "RouterEvents": {
            "Type": "AWS::Lambda::EventSourceMapping",
            "Properties": {
                "FunctionName": {"Ref": "Router"},
                "EventSourceArn": {"Fn::GetAtt": ["Queue", "Arn"]},
            },
        },
        "ReconcilerSchedule": {
            "Type": "AWS::Events::Rule",
            "Properties": {
                "ScheduleExpression": "rate(5 minutes)",
                "State": "ENABLED",
                "Targets": [{"Id": "Target0", "Arn": {"Fn::GetAtt": ["Router", "Arn"]}}],
            },
        },
    },
    "Outputs": {"WebhookUrl": {"Value": "https://example.com/webhook"}},
}


@pytest.fixture
def deployed(tmp_path: Path) -> Iterator[dict[str, Any]]:
    with mock_aws():
        cloudformation = boto3.client("cloudformation", region_name="eu-west-1")
        cloudformation.create_stack(StackName="Squadron-prod", TemplateBody=json.dumps(TEMPLATE))
        resources = {
            r["LogicalResourceId"]: r["PhysicalResourceId"]
            for r in cloudformation.list_stack_resources(StackName="Squadron-prod")["StackResourceSummaries"]
        }
        ecs = boto3.client("ecs", region_name="eu-west-1")
        ecs.register_task_definition(
            family="agent",
            containerDefinitions=[{"name": "agent", "image": "agent:latest", "cpu": 256, "memory": 512}],
        )
        # moto runs tasks on registered container instances (its Fargate path is incomplete); the
        # cluster cannot tell: CloudFormation would refuse to delete it either way.
        ec2 = boto3.client("ec2", region_name="eu-west-1")
        instance = ec2.run_instances(ImageId=EXAMPLE_AMI_ID, InstanceType="m5.large", MinCount=1, MaxCount=1)[
            "Instances"
        ][0]
        ecs.register_container_instance(
            cluster=resources["Cluster"],
            instanceIdentityDocument=json.dumps(
                {
                    "instanceId": instance["InstanceId"],
                    "region": "eu-west-1",
                    "availabilityZone": instance["Placement"]["AvailabilityZone"],
                    "imageId": EXAMPLE_AMI_ID,
                    "instanceType": "m5.large",
                    "privateIp": instance["PrivateIpAddress"],
                    "accountId": "123456789012",
                    "architecture": "x86_64",
                }
            ),
        )
        tasks = [
            t["taskArn"]
            for t in ecs.run_task(
                cluster=resources["Cluster"],
                taskDefinition="agent",
                launchType="EC2",
                count=3,
            )["tasks"]
        ]
        (tmp_path / "cdk.context.json").write_text(json.dumps({"stage": "prod", "region": "eu-west-1"}))
        yield {"resources": resources, "tasks": tasks, "ecs": ecs}


def _cdk(tmp_path: Path) -> str:
    """A stand-in for `npx cdk` that records how it was called."""
    script = tmp_path / "cdk"
    script.write_text(f'#!/bin/sh\necho "$@" > {tmp_path / "cdk-called"}\n')
    script.chmod(0o755)
    return str(script)


def test_destroy_stops_the_launchers_and_every_agent_task_before_cdk_destroy(
    deployed: dict[str, Any], tmp_path: Path
) -> None:
    out = io.StringIO()
    status = main(
        ["destroy", "--yes", "--file", str(tmp_path / "cdk.context.json"), "--cdk", _cdk(tmp_path)], out=out
    )
    assert status == 0, out.getvalue()
    ecs, cluster = deployed["ecs"], deployed["resources"]["Cluster"]
    assert ecs.list_tasks(cluster=cluster, desiredStatus="RUNNING")["taskArns"] == []
    described = ecs.describe_tasks(cluster=cluster, tasks=deployed["tasks"])["tasks"]
    assert {t["lastStatus"] for t in described} == {"STOPPED"}
    mapping = boto3.client("lambda", region_name="eu-west-1").get_event_source_mapping(
        UUID=deployed["resources"]["RouterEvents"]
    )
    assert mapping["State"] in {"Disabled", "Disabling"}
    rule = boto3.client("events", region_name="eu-west-1").describe_rule(
        Name=deployed["resources"]["ReconcilerSchedule"].split("|")[-1]
    )
    assert rule["State"] == "DISABLED"
    assert (tmp_path / "cdk-called").read_text().split() == ["destroy", "--force", "Squadron-prod"]
    assert "3 agent task(s) stopped" in out.getvalue()


def test_without_yes_nothing_is_stopped(deployed: dict[str, Any], tmp_path: Path) -> None:
    out = io.StringIO()
    status = main(["destroy", "--file", str(tmp_path / "cdk.context.json"), "--cdk", _cdk(tmp_path)], out=out)
    assert status == 0
    ecs, cluster = deployed["ecs"], deployed["resources"]["Cluster"]
    assert len(ecs.list_tasks(cluster=cluster, desiredStatus="RUNNING")["taskArns"]) == 3
    assert not (tmp_path / "cdk-called").exists()
    assert "squadron destroy --yes" in out.getvalue()
