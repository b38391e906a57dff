"""The router construct in a small stack of its own, checked by cdk-nag like the app."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import assertions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sqs as sqs
from cdk_nag import AwsSolutionsChecks

from infra.constructs.router import DEFAULT_MAX_CONCURRENCY, REGISTRY_ACTIONS, AgentTarget, EventRouter
from tests.infra.synth import cdk_json_context

pytestmark = pytest.mark.infra


def _statements(template: assertions.Template) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for policy in template.find_resources("AWS::IAM::Policy").values():
        out += policy["Properties"]["PolicyDocument"]["Statement"]
    return out


def _actions(statement: dict[str, Any]) -> list[str]:
    granted = statement["Action"]
    return granted if isinstance(granted, list) else [granted]


SCAFFOLD_RULES = tuple(f"AwsSolutions-{rule}" for rule in ("ECS4", "ECS7", "SMG4", "SQS3", "SQS4", "VPC7"))


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> assertions.Template:
    outdir: Path = tmp_path_factory.mktemp("router.out")
    app = cdk.App(context=cdk_json_context(), outdir=str(outdir))
    stack = cdk.Stack(app, "RouterUnderTest")
    # Test scaffolding around the construct; only the construct itself is judged by cdk-nag.
    vpc = ec2.Vpc(stack, "Vpc", max_azs=2, nat_gateways=1)
    cluster = ecs.Cluster(stack, "Cluster", vpc=vpc)
    task = ecs.FargateTaskDefinition(stack, "AgentTask", cpu=1024, memory_limit_mib=2048)
    task.add_container("agent", image=ecs.ContainerImage.from_registry("agent:test"))
    group = ec2.SecurityGroup(stack, "Agents", vpc=vpc)
    queue = sqs.Queue(stack, "Events", fifo=True, visibility_timeout=cdk.Duration.minutes(6))
    table = dynamodb.TableV2(
        stack,
        "Registry",
        partition_key=dynamodb.Attribute(name="PK", type=dynamodb.AttributeType.STRING),
        sort_key=dynamodb.Attribute(name="SK", type=dynamodb.AttributeType.STRING),
    )
    key = secretsmanager.Secret(stack, "PrivateKey")
    layer = lambda_.LayerVersion.from_layer_version_arn(
        stack, "Layer", "arn:aws:lambda:us-east-1:123456789012:layer:squadron:1"
    )
    router = EventRouter(
        stack,
        "Router",
        layer=layer,
        queue=queue,
        table=table,
        private_key=key,
        github_app_id="123456",
        github_app_slug="acme-bot",
        agents=AgentTarget(cluster, task, "agent", vpc.private_subnets, group),
        log_retention=logs.RetentionDays.ONE_MONTH,
        metrics_namespace="Squadron/test",
    )
    for scaffold in (vpc, cluster, task, group, queue, table, key):
        cdk.Validations.of(scaffold).acknowledge(
            *[
                cdk.Acknowledgment(
                    id=rule, reason="test scaffolding around the router construct, not under test"
                )
                for rule in SCAFFOLD_RULES
            ]
        )
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    assembly = app.synth()  # raises on any unacknowledged finding of the router construct
    assert router.function is not None
    return assertions.Template.from_json(dict(assembly.get_stack_artifact(stack.artifact_id).template))


def test_consumes_events_fifo_with_partial_batch_responses(template: assertions.Template) -> None:
    template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "BatchSize": EventRouter.BATCH_SIZE,
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
            "ScalingConfig": {"MaximumConcurrency": DEFAULT_MAX_CONCURRENCY},
        },
    )


def test_function_knows_its_registry_agents_and_app(template: assertions.Template) -> None:
    functions = template.find_resources("AWS::Lambda::Function")
    (router,) = [
        f for f in functions.values() if "route events.fifo" in f["Properties"].get("Description", "")
    ]
    env = router["Properties"]["Environment"]["Variables"]
    assert set(env) >= {
        "REGISTRY_TABLE_NAME",
        "AGENT_CLUSTER",
        "AGENT_TASK_DEFINITION",
        "AGENT_CONTAINER_NAME",
        "AGENT_SUBNETS",
        "AGENT_SECURITY_GROUPS",
        "GITHUB_APP_ID",
        "GITHUB_PRIVATE_KEY_SECRET_ARN",
        "EVENTS_QUEUE_URL",
    }
    assert router["Properties"]["Timeout"] == EventRouter.TIMEOUT.to_seconds()


def test_the_router_consumes_and_sends_to_events_fifo_only(template: assertions.Template) -> None:
    # Consuming (the event source) and sending (the merge gate's announcements), one queue.
    (statement,) = [s for s in _statements(template) if "sqs:SendMessage" in str(s["Action"])]
    assert sorted(statement["Action"]) == [
        "sqs:ChangeMessageVisibility",
        "sqs:DeleteMessage",
        "sqs:GetQueueAttributes",
        "sqs:GetQueueUrl",
        "sqs:ReceiveMessage",
        "sqs:SendMessage",
    ]
    assert "Events" in str(statement["Resource"])


def test_registry_access_is_item_level_only(template: assertions.Template) -> None:
    actions: set[str] = set()
    for statement in _statements(template):
        granted = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        actions |= {a for a in granted if a.startswith("dynamodb:")}
    assert actions == set(REGISTRY_ACTIONS)


@pytest.mark.parametrize(
    ("action", "condition_key"),
    [
        ("ecs:RunTask", "ecs:cluster"),
        ("ecs:StopTask", "ecs:cluster"),
        ("ecs:ListTasks", "ecs:cluster"),
        ("ecs:DescribeTasks", "ecs:cluster"),
        ("ecs:TagResource", "ecs:CreateAction"),
        ("iam:PassRole", "iam:PassedToService"),
    ],
)
def test_agent_task_permissions_are_conditioned(
    template: assertions.Template, action: str, condition_key: str
) -> None:
    (statement,) = [s for s in _statements(template) if action in _actions(s)]
    conditions = {key for block in statement["Condition"].values() for key in block}
    assert condition_key in conditions
    assert statement["Resource"] != "*"


def test_a_retried_launch_may_look_up_tasks_of_the_agent_cluster_only(template: assertions.Template) -> None:
    """ListTasks (by startedBy) and DescribeTasks: what a retried launch asks to adopt the task an
    earlier attempt started (squadron.shell.launching); the cluster's instances and tasks only."""
    (listing,) = [s for s in _statements(template) if "ecs:ListTasks" in _actions(s)]
    (describing,) = [s for s in _statements(template) if "ecs:DescribeTasks" in _actions(s)]
    assert ":container-instance/" in str(listing["Resource"])
    assert ":task/" in str(describing["Resource"])
    for statement in (listing, describing):
        assert "ecs:cluster" in statement["Condition"]["ArnEquals"]
