"""The registry table and events.fifo under moto, as the agent and reconciler tests use them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import boto3

from squadron.adapters.dynamo_registry import TABLE_DEFINITION, DynamoRegistry
from squadron.domain.events import EventEnvelope

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


def registry_and_queue() -> tuple[DynamoRegistry, SQSClient, str]:
    """A fresh registry table and events.fifo (call inside ``mock_aws``)."""
    dynamodb = boto3.client("dynamodb")
    dynamodb.create_table(TableName="registry", **TABLE_DEFINITION)
    sqs = boto3.client("sqs")
    url = sqs.create_queue(
        QueueName="events.fifo", Attributes={"FifoQueue": "true", "VisibilityTimeout": "0"}
    )["QueueUrl"]
    return DynamoRegistry("registry", client=dynamodb), sqs, url


@dataclass(frozen=True)
class AgentCompute:
    """What the router's launcher needs on ECS: a cluster, the agent task definition, a network."""

    cluster_arn: str
    task_definition: str
    subnet: str
    security_group: str


def agent_compute() -> AgentCompute:
    """The ECS cluster, Fargate task definition, subnet and security group (call inside ``mock_aws``)."""
    ec2 = boto3.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    ec2.modify_vpc_attribute(VpcId=vpc, EnableDnsHostnames={"Value": True})
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24")["Subnet"]["SubnetId"]
    group = ec2.create_security_group(GroupName="agents", Description="agents", VpcId=vpc)["GroupId"]
    ecs = boto3.client("ecs")
    cluster = ecs.create_cluster(clusterName="squadron")["cluster"]["clusterArn"]
    definition = ecs.register_task_definition(
        family="agent",
        requiresCompatibilities=["FARGATE"],
        networkMode="awsvpc",
        cpu="1024",
        memory="2048",
        containerDefinitions=[{"name": "agent", "image": "agent:latest", "memory": 2048}],
    )["taskDefinition"]["taskDefinitionArn"]
    return AgentCompute(cluster, definition, subnet, group)


def drain(sqs: SQSClient, queue_url: str, route: Callable[[EventEnvelope], Any]) -> list[EventEnvelope]:
    """Route what is on events.fifo (as the router Lambda would) and delete it; the envelopes."""
    messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", [])
    envelopes = [EventEnvelope.from_message(m["Body"]) for m in messages]
    for envelope, message in zip(envelopes, messages, strict=True):
        route(envelope)
        sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
    return envelopes
