"""The synthesized template: each resource of the foundation and its key properties."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Match
from constructs import Construct
from pydantic import BaseModel

from infra.constructs.agents import AGENTS_PATH, DROPPED_CAPABILITIES, GATEWAY_REGISTRY_ACTIONS
from infra.constructs.pipelines import PUBLISH_ACTIONS
from infra.stack import SquadronStack
from squadron.adapters.dynamo_registry import TABLE_DEFINITION, TTL_ATTRIBUTE
from squadron.adapters.ecs import AGENT_ID_ENV, LAUNCH_TOKEN_ENV
from squadron.domain.launches import SECRET_ENV
from squadron.settings import (
    AgentSettings,
    DashboardSettings,
    GatewaySettings,
    IngressSettings,
    ReconcilerSettings,
    RouterSettings,
    load_settings,
)
from tests.infra.synth import Synthesized

pytestmark = pytest.mark.infra

ROUTER_VISIBILITY_TIMEOUT_SECONDS = 540  # 6x the router's 90 s (tests/infra/test_infra_deploy.py)
FOURTEEN_DAYS_SECONDS = 14 * 24 * 3600

# (case id, resource type, expected properties as a deep partial match)
RESOURCE_PROPERTIES: list[tuple[str, str, dict[str, Any]]] = [
    (
        "events-fifo-queue",
        "AWS::SQS::Queue",
        {
            "QueueName": "squadron-ci-events.fifo",
            "FifoQueue": True,
            "ContentBasedDeduplication": False,
            "DeduplicationScope": "messageGroup",
            "FifoThroughputLimit": "perMessageGroupId",
            "SqsManagedSseEnabled": True,
            "VisibilityTimeout": ROUTER_VISIBILITY_TIMEOUT_SECONDS,
            "RedrivePolicy": {"maxReceiveCount": 7},
        },
    ),
    (
        "events-dead-letter-queue",
        "AWS::SQS::Queue",
        {
            "QueueName": "squadron-ci-events-dlq.fifo",
            "FifoQueue": True,
            "ContentBasedDeduplication": False,
            "SqsManagedSseEnabled": True,
            "MessageRetentionPeriod": FOURTEEN_DAYS_SECONDS,
        },
    ),
    (
        "queues-enforce-ssl",
        "AWS::SQS::QueuePolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}}
                        )
                    ]
                )
            }
        },
    ),
    (
        "http-api",
        "AWS::ApiGatewayV2::Api",
        {"ProtocolType": "HTTP"},
    ),
    (
        "webhook-route",
        "AWS::ApiGatewayV2::Route",
        {"RouteKey": "POST /webhook", "AuthorizationType": "NONE"},
    ),
    (
        "default-stage-throttled-and-logged",
        "AWS::ApiGatewayV2::Stage",
        {
            "StageName": "$default",
            "AutoDeploy": True,
            "DefaultRouteSettings": {"ThrottlingRateLimit": 25, "ThrottlingBurstLimit": 40},
            "AccessLogSettings": {
                "DestinationArn": Match.any_value(),
                "Format": Match.string_like_regexp("requestId"),
            },
        },
    ),
    (
        "ingress-function",
        "AWS::Lambda::Function",
        {
            "Runtime": "python3.12",
            "Handler": "handler.handler",
            "Timeout": 10,
            "MemorySize": 512,
            "Architectures": ["x86_64"],
            "TracingConfig": Match.absent(),  # X-Ray is opt-in for the ingress (TRACING)
            "Layers": [Match.any_value()],
            "LoggingConfig": {"LogGroup": Match.any_value()},
        },
    ),
    (
        "shared-layer",
        "AWS::Lambda::LayerVersion",
        {"CompatibleRuntimes": ["python3.12"], "CompatibleArchitectures": ["x86_64"]},
    ),
    (
        "dead-letters-alarm",
        "AWS::CloudWatch::Alarm",
        {
            "MetricName": "ApproximateNumberOfMessagesVisible",
            "Namespace": "AWS/SQS",
            "Statistic": "Maximum",
            "ComparisonOperator": "GreaterThanThreshold",
            "Threshold": 0,
            "AlarmActions": [{"Ref": Match.string_like_regexp("AlarmTopic")}],
        },
    ),
    (
        "oldest-event-alarm",
        "AWS::CloudWatch::Alarm",
        {
            "MetricName": "ApproximateAgeOfOldestMessage",
            "Namespace": "AWS/SQS",
            "ComparisonOperator": "GreaterThanThreshold",
            "Threshold": 300,
            "AlarmActions": [{"Ref": Match.string_like_regexp("AlarmTopic")}],
        },
    ),
    (
        "alarm-topic-encrypted",
        "AWS::SNS::Topic",
        {"KmsMasterKeyId": Match.any_value()},
    ),
    (
        "alarm-topic-enforces-ssl",
        "AWS::SNS::TopicPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}}
                        )
                    ]
                )
            }
        },
    ),
    (
        "alarm-email-subscription",
        "AWS::SNS::Subscription",
        {"Protocol": "email", "Endpoint": "ops@example.com"},
    ),
    (
        "alarm-key-rotated-and-usable-by-cloudwatch",
        "AWS::KMS::Key",
        {
            "EnableKeyRotation": True,
            "KeyPolicy": {
                "Statement": Match.array_with(
                    [Match.object_like({"Principal": {"Service": "cloudwatch.amazonaws.com"}})]
                )
            },
        },
    ),
    (
        "webhook-secret",
        "AWS::SecretsManager::Secret",
        {
            "Description": Match.string_like_regexp(r"^Squadron \(ci\): HMAC"),
            "GenerateSecretString": Match.any_value(),
        },
    ),
    (
        "private-key-secret",
        "AWS::SecretsManager::Secret",
        {"Description": Match.string_like_regexp(r"^Squadron \(ci\): PEM private key")},
    ),
]


@pytest.mark.parametrize(
    ("resource_type", "properties"),
    [(resource_type, properties) for _, resource_type, properties in RESOURCE_PROPERTIES],
    ids=[case_id for case_id, _, _ in RESOURCE_PROPERTIES],
)
def test_resource_has_properties(
    synthesized: Synthesized, resource_type: str, properties: dict[str, Any]
) -> None:
    synthesized.template.has_resource_properties(resource_type, properties)


RESOURCE_COUNTS = [
    # events.fifo, its DLQ, the event publisher's failure queue, the dashboards queue and its DLQ
    ("AWS::SQS::Queue", 5),
    ("AWS::ApiGatewayV2::Api", 1),
    ("AWS::ApiGatewayV2::Route", 1),  # POST /webhook and nothing else
    ("AWS::ApiGatewayV2::Authorizer", 0),
    # ingress, router, agent gateway, reconciler, event publisher, dashboards, the VPC's
    # default-SG custom resource, the provider that creates ECS's service-linked role
    ("AWS::Lambda::Function", 8),
    # the reconciler's tick, domain events to their log group, domain events to the dashboards,
    # failed pipeline runs (counted, no target)
    ("AWS::Events::Rule", 4),
    ("AWS::Lambda::LayerVersion", 1),
    # two on the queue, seven behind the dashboard, publish failures, dashboard refreshes
    # dead-lettered, failed pipeline runs
    ("AWS::CloudWatch::Alarm", 12),
    ("AWS::CloudWatch::Dashboard", 1),
    ("AWS::SNS::Topic", 1),
    ("AWS::SecretsManager::Secret", 3),  # webhook secret, App key, Copilot token
    # 6 functions, API access, VPC flow logs, agent tasks, domain events, the service-linked role's
    # provider
    ("AWS::Logs::LogGroup", 11),
]


@pytest.mark.parametrize(("resource_type", "count"), RESOURCE_COUNTS, ids=[row[0] for row in RESOURCE_COUNTS])
def test_resource_count(synthesized: Synthesized, resource_type: str, count: int) -> None:
    synthesized.template.resource_count_is(resource_type, count)


def test_log_groups_have_the_configured_retention(synthesized: Synthesized) -> None:
    log_groups = synthesized.resources("AWS::Logs::LogGroup")
    assert {group["Properties"]["RetentionInDays"] for group in log_groups.values()} == {14}


def _function(synthesized: Synthesized, construct: Construct) -> dict[str, Any]:
    function: dict[str, Any] = synthesized.resources("AWS::Lambda::Function")[
        synthesized.logical_id(construct)
    ]
    return function


def test_ingress_environment(synthesized: Synthesized) -> None:
    function = _function(synthesized, synthesized.stack.ingress.function)
    environment = function["Properties"]["Environment"]["Variables"]
    assert environment == {
        "EVENTS_QUEUE_URL": {"Ref": synthesized.logical_id(synthesized.stack.events.queue)},
        "WEBHOOK_SECRET_ARN": {"Ref": synthesized.logical_id(synthesized.stack.secrets.webhook_secret)},
        "GITHUB_APP_ID": "123456",
        "GITHUB_APP_SLUG": "squadron-ci",
        "MAX_BODY_BYTES": "1048576",
        "POWERTOOLS_TRACE_DISABLED": "true",  # the handler never imports the X-Ray SDK
        "POWERTOOLS_SERVICE_NAME": "ingress",
        "POWERTOOLS_METRICS_NAMESPACE": "Squadron/ci",
        "LOG_LEVEL": "INFO",
    }


def test_ingress_environment_satisfies_the_function_settings(synthesized: Synthesized) -> None:
    # The contract with functions/ingress: its settings model accepts what the stack sets.
    function = _function(synthesized, synthesized.stack.ingress.function)
    environment = {
        name: value if isinstance(value, str) else f"<{name} resolved at deploy>"
        for name, value in function["Properties"]["Environment"]["Variables"].items()
    }
    settings = load_settings(IngressSettings, environment)
    assert (settings.github_app_id, settings.max_body_bytes) == (123456, 1048576)


def _statements_of(synthesized: Synthesized, role: Construct) -> list[dict[str, Any]]:
    role_id = synthesized.logical_id(role)
    statements: list[dict[str, Any]] = []
    for policy in synthesized.resources("AWS::IAM::Policy").values():
        if {"Ref": role_id} in policy["Properties"]["Roles"]:
            statements.extend(policy["Properties"]["PolicyDocument"]["Statement"])
    return statements


def _statements_of_ingress_role(synthesized: Synthesized) -> list[dict[str, Any]]:
    return _statements_of(synthesized, synthesized.stack.ingress.role)


def test_ingress_role_has_only_the_granted_permissions(synthesized: Synthesized) -> None:
    stack = synthesized.stack
    granted = {
        (tuple(sorted(_as_list(statement["Action"]))), repr(statement["Resource"]))
        for statement in _statements_of_ingress_role(synthesized)
        if statement["Effect"] == "Allow"
    }
    assert granted == {
        (
            ("sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:SendMessage"),
            repr({"Fn::GetAtt": [synthesized.logical_id(stack.events.queue), "Arn"]}),
        ),
        (
            ("secretsmanager:DescribeSecret", "secretsmanager:GetSecretValue"),
            repr({"Ref": synthesized.logical_id(stack.secrets.webhook_secret)}),
        ),
        # Its own log group only (no AWSLambdaBasicExecutionRole) ...
        (
            ("logs:CreateLogStream", "logs:PutLogEvents"),
            repr({"Fn::GetAtt": [synthesized.logical_id(stack.ingress.function_log_group), "Arn"]}),
        ),
        # No X-Ray: the ingress does not trace (WebhookIngress.TRACING), so no wildcard either.
    }


def test_ingress_role_has_no_managed_policy_and_no_private_key(synthesized: Synthesized) -> None:
    role_id = synthesized.logical_id(synthesized.stack.ingress.role)
    role = synthesized.resources("AWS::IAM::Role")[role_id]
    assert "ManagedPolicyArns" not in role["Properties"]
    private_key_id = synthesized.logical_id(synthesized.stack.secrets.private_key)
    assert private_key_id not in repr(_statements_of_ingress_role(synthesized))


def test_webhook_url_is_an_output(synthesized: Synthesized) -> None:
    separator, parts = synthesized.template_json["Outputs"]["WebhookUrl"]["Value"]["Fn::Join"]
    assert separator == ""
    assert parts[0] == "https://"
    assert ".execute-api." in parts
    assert parts[-1] == "/webhook"


#: CPython 3.12's bytecode magic number (3531), as the first four bytes of a .pyc (PEP 552).
PYC_312_MAGIC = (3531).to_bytes(2, "little") + b"\r\n"
#: PEP 552 flags: hash-based (bit 0), not checked against the source (bit 1 clear).
UNCHECKED_HASH = 0b01


def _pyc_problems(root: Path) -> list[str]:
    """Every .py under ``root`` without a valid CPython 3.12, unchecked hash-based .pyc beside it."""
    problems: list[str] = []
    for source in root.rglob("*.py"):
        compiled = source.parent / "__pycache__" / f"{source.stem}.cpython-312.pyc"
        if not compiled.is_file():
            problems.append(f"{source.relative_to(root)}: no 3.12 bytecode")
            continue
        header = compiled.read_bytes()[:8]
        if header[:4] != PYC_312_MAGIC or int.from_bytes(header[4:8], "little") != UNCHECKED_HASH:
            problems.append(f"{source.relative_to(root)}: {header[:8]!r}")
    return problems


def test_layer_bundle_has_dependencies_fresh_package_and_312_bytecode(synthesized: Synthesized) -> None:
    (bundle,) = [path.parent for path in synthesized.outdir.glob("asset.*/python")]
    site_packages = bundle / "python"
    assert (site_packages / "squadron" / "__init__.py").is_file()
    assert list(site_packages.glob("pydantic_core/*cpython-312-x86_64-linux-gnu.so"))
    assert (site_packages / "aws_lambda_powertools").is_dir()
    # Lambda's /opt is read-only: every module on the cold path ships compiled for its CPython.
    for package in (
        "squadron",
        "aws_lambda_powertools",
        "pydantic",
        "boto3",
        "botocore",
        "jwt",
        "yaml",
        "httpx",
    ):
        assert _pyc_problems(site_packages / package) == [], package
    assert not list(site_packages.glob("**/*.cpython-311.pyc"))  # nothing of the build machine's Python
    source = Path(__file__).resolve().parents[2] / "layers" / "squadron" / "squadron" / "shell" / "router.py"
    assert (site_packages / "squadron" / "shell" / "router.py").read_text() == source.read_text()  # fresh


def test_every_function_ships_312_bytecode(synthesized: Synthesized) -> None:
    handlers = [path.parent for path in synthesized.outdir.glob("asset.*/handler.py")]
    assert len(handlers) == 6  # ingress, router, reconciler, agent gateway, event publisher, dashboards
    for code in handlers:
        assert _pyc_problems(code) == [], code


def _as_list(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else value


def test_registry_table_matches_the_adapter(synthesized: Synthesized) -> None:
    (table,) = synthesized.resources("AWS::DynamoDB::GlobalTable").values()
    props = table["Properties"]
    assert props["KeySchema"] == TABLE_DEFINITION["KeySchema"]
    assert sorted(props["AttributeDefinitions"], key=lambda a: a["AttributeName"]) == sorted(
        TABLE_DEFINITION["AttributeDefinitions"], key=lambda a: a["AttributeName"]
    )
    (index,) = props["GlobalSecondaryIndexes"]
    (expected,) = TABLE_DEFINITION["GlobalSecondaryIndexes"]
    assert (index["IndexName"], index["KeySchema"], index["Projection"]) == (
        expected["IndexName"],
        expected["KeySchema"],
        expected["Projection"],
    )
    assert props["TimeToLiveSpecification"] == {"AttributeName": TTL_ATTRIBUTE, "Enabled": True}
    (replica,) = props["Replicas"]
    assert replica["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
    assert replica["DeletionProtectionEnabled"] is True
    assert table["DeletionPolicy"] == "Retain"


def _resolved(variables: dict[str, Any]) -> dict[str, str]:
    return {
        name: value if isinstance(value, str) else f"resolved-{name}" for name, value in variables.items()
    }


@pytest.mark.parametrize(
    ("construct", "settings"),
    [
        (lambda s: s.router.function, RouterSettings),
        (lambda s: s.agents.gateway, GatewaySettings),
        (lambda s: s.reconciler.function, ReconcilerSettings),
        (lambda s: s.dashboards.function, DashboardSettings),
    ],
    ids=["router", "agent gateway", "reconciler", "dashboards"],
)
def test_function_environments_satisfy_their_settings(
    synthesized: Synthesized, construct: Callable[[SquadronStack], Construct], settings: type[BaseModel]
) -> None:
    function = _function(synthesized, construct(synthesized.stack))
    environment = _resolved(function["Properties"]["Environment"]["Variables"])
    if settings is not GatewaySettings:
        environment["GITHUB_APP_ID"] = "123456"
    loaded = load_settings(settings, environment)
    if isinstance(loaded, ReconcilerSettings):  # told where to ask for the dashboards
        assert loaded.dashboard_queue_url == "resolved-DASHBOARD_QUEUE_URL"


def test_agent_task_environment_plus_launch_overrides_satisfy_the_agent_settings(
    synthesized: Synthesized,
) -> None:
    (task,) = synthesized.resources("AWS::ECS::TaskDefinition").values()
    (container,) = task["Properties"]["ContainerDefinitions"]
    environment = _resolved({e["Name"]: e["Value"] for e in container["Environment"]})
    # Names only: nothing in the task definition is a secret (the launch's comes per RunTask).
    assert set(environment) == {"AGENT_GATEWAY_FUNCTION", "SQUADRON_AGENTS_ROOT", "XDG_CACHE_HOME"}
    assert "Secrets" not in container
    launch = {
        AGENT_ID_ENV: "1-38-feat-dev",
        LAUNCH_TOKEN_ENV: "1-38-feat-dev-g1-l1",
        SECRET_ENV: "x" * 43,
        "COPILOT_CLI_PATH": "/opt/copilot",
    }
    settings = load_settings(AgentSettings, {**environment, **launch})
    assert settings.agents_root == AGENTS_PATH
    (mount,) = container["MountPoints"]
    assert mount["ContainerPath"] == AGENTS_PATH
    (volume,) = task["Properties"]["Volumes"]
    assert volume["EFSVolumeConfiguration"]["TransitEncryption"] == "ENABLED"
    assert volume["EFSVolumeConfiguration"]["AuthorizationConfig"]["IAM"] == "ENABLED"


def test_the_agent_host_runs_as_root_with_only_the_capabilities_it_needs(synthesized: Synthesized) -> None:
    (task,) = synthesized.resources("AWS::ECS::TaskDefinition").values()
    (container,) = task["Properties"]["ContainerDefinitions"]
    # Root, so that it can hand each agent its own directory and run its CLI as the agent's user.
    assert container["User"] == "0"
    linux = container["LinuxParameters"]
    assert linux["InitProcessEnabled"] is True
    assert sorted(linux["Capabilities"]["Drop"]) == sorted(str(c.value) for c in DROPPED_CAPABILITIES)
    assert "Add" not in linux["Capabilities"]


def test_the_agent_image_is_built_for_the_tasks_platform_from_a_stable_context(
    synthesized: Synthesized,
) -> None:
    manifests = list(synthesized.outdir.glob("*.assets.json"))
    images = [
        image
        for manifest in manifests
        for image in json.loads(manifest.read_text()).get("dockerImages", {}).values()
    ]
    (image,) = images
    assert image["source"]["platform"] == "linux/amd64"
    assert image["source"]["dockerFile"] == "functions/agent/Dockerfile"
    context = synthesized.outdir / image["source"]["directory"]
    assert not list(context.glob("**/*.egg-info")) and not (context / ".venv").exists()
    assert not (context / "node_modules").exists() and not (context / "tests").exists()


def test_agents_files_belong_to_their_own_users_on_an_elastic_file_system(synthesized: Synthesized) -> None:
    (access_point,) = synthesized.resources("AWS::EFS::AccessPoint").values()
    properties = access_point["Properties"]
    assert "PosixUser" not in properties  # no shared user: every agent's directory is its own uid's
    assert properties["RootDirectory"]["CreationInfo"] == {
        "OwnerUid": "0",
        "OwnerGid": "0",
        "Permissions": "711",
    }
    (file_system,) = synthesized.resources("AWS::EFS::FileSystem").values()
    assert file_system["Properties"]["ThroughputMode"] == "elastic"
    assert file_system["Properties"]["Encrypted"] is True


def test_the_reconciler_only_reads_the_registry_and_sends_to_the_queue(synthesized: Synthesized) -> None:
    stack = synthesized.stack
    table_arn = {"Fn::GetAtt": [synthesized.logical_id(stack.registry.table), "Arn"]}
    cluster = synthesized.logical_id(stack.agents.cluster)
    tasks_of_cluster = {
        "Fn::Join": [
            "",
            [
                "arn:",
                {"Ref": "AWS::Partition"},
                ":ecs:",
                {"Ref": "AWS::Region"},
                ":",
                {"Ref": "AWS::AccountId"},
                ":task/",
                {"Ref": cluster},
                "/*",
            ],
        ]
    }
    schedules = {
        "Fn::Join": [
            "",
            [
                "arn:",
                {"Ref": "AWS::Partition"},
                ":scheduler:",
                {"Ref": "AWS::Region"},
                ":",
                {"Ref": "AWS::AccountId"},
                ":schedule/",
                {"Ref": next(iter(synthesized.resources("AWS::Scheduler::ScheduleGroup")))},
                "/*",
            ],
        ]
    }
    scheduler_role = {"Fn::GetAtt": [synthesized.logical_id(stack.reconciler.scheduler_role), "Arn"]}
    granted = {
        (tuple(sorted(_as_list(statement["Action"]))), repr(statement["Resource"]))
        for statement in _statements_of(synthesized, stack.reconciler.role)
        if statement["Effect"] == "Allow"
    }
    assert granted == {
        (("dynamodb:Query",), repr({"Fn::Join": ["", [table_arn, "/index/by-status"]]})),
        (("dynamodb:GetItem",), repr(table_arn)),
        # events.fifo (its repairs), and the dashboards queue (its sweeps: every repository's dashboard)
        (
            ("sqs:SendMessage",),
            repr(
                [
                    {"Fn::GetAtt": [synthesized.logical_id(stack.dashboards.queue), "Arn"]},
                    {"Fn::GetAtt": [synthesized.logical_id(stack.events.queue), "Arn"]},
                ]
            ),
        ),
        (
            ("secretsmanager:DescribeSecret", "secretsmanager:GetSecretValue"),
            repr({"Ref": synthesized.logical_id(stack.secrets.private_key)}),
        ),
        (
            ("logs:CreateLogStream", "logs:PutLogEvents"),
            repr({"Fn::GetAtt": [synthesized.logical_id(stack.reconciler.log_group), "Arn"]}),
        ),
        # X-Ray, and listing the pipelines' state machines (ListStateMachines has no resource)
        (("states:ListStateMachines", "xray:PutTelemetryRecords", "xray:PutTraceSegments"), repr("*")),
        (("ecs:DescribeTasks",), repr(tasks_of_cluster)),
        # each repository's pipelines, published as the stage's state machines, run with their role
        (tuple(sorted(PUBLISH_ACTIONS)), repr(stack.resolve(stack.pipelines.machines))),
        (("iam:PassRole",), repr({"Fn::GetAtt": [synthesized.logical_id(stack.pipelines.role), "Arn"]})),
        # each repository's retrospective schedule, in the stage's own group, sent with its role
        (
            (
                "scheduler:CreateSchedule",
                "scheduler:DeleteSchedule",
                "scheduler:GetSchedule",
                "scheduler:UpdateSchedule",
            ),
            repr(schedules),
        ),
        (("iam:PassRole",), repr(scheduler_role)),
    }
    statements = _statements_of(synthesized, stack.reconciler.role)
    (describe,) = [s for s in statements if s["Action"] == "ecs:DescribeTasks"]
    assert describe["Condition"] == {
        "ArnEquals": {"ecs:cluster": {"Fn::GetAtt": [synthesized.logical_id(stack.agents.cluster), "Arn"]}}
    }
    passed = sorted(
        s["Condition"]["StringEquals"]["iam:PassedToService"]
        for s in statements
        if s["Action"] == "iam:PassRole"
    )
    assert passed == ["scheduler.amazonaws.com", "states.amazonaws.com"]


def test_the_retrospective_schedules_send_to_the_queue_and_nothing_else(synthesized: Synthesized) -> None:
    stack = synthesized.stack
    (group,) = synthesized.resources("AWS::Scheduler::ScheduleGroup").values()
    assert group["Properties"]["Name"].endswith("-retrospectives")
    role = synthesized.resources("AWS::IAM::Role")[synthesized.logical_id(stack.reconciler.scheduler_role)]
    (trust,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "scheduler.amazonaws.com"}
    (group_id,) = synthesized.resources("AWS::Scheduler::ScheduleGroup")
    assert trust["Condition"] == {  # this account's schedules of this group only (confused deputy)
        "StringEquals": {
            "aws:SourceAccount": {"Ref": "AWS::AccountId"},
            "aws:SourceArn": {"Fn::GetAtt": [group_id, "Arn"]},
        }
    }
    granted = [
        (statement["Action"], statement["Resource"])
        for statement in _statements_of(synthesized, stack.reconciler.scheduler_role)
    ]
    assert granted == [
        ("sqs:SendMessage", {"Fn::GetAtt": [synthesized.logical_id(stack.events.queue), "Arn"]})
    ]
    env = _function(synthesized, stack.reconciler.function)["Properties"]["Environment"]["Variables"]
    assert env["SCHEDULE_GROUP"] == {
        "Ref": next(iter(synthesized.resources("AWS::Scheduler::ScheduleGroup")))
    }
    assert env["SCHEDULER_ROLE_ARN"] == {
        "Fn::GetAtt": [synthesized.logical_id(stack.reconciler.scheduler_role), "Arn"]
    }


def test_the_router_reads_the_history_on_the_status_index(synthesized: Synthesized) -> None:
    stack = synthesized.stack
    table_arn = {"Fn::GetAtt": [synthesized.logical_id(stack.registry.table), "Arn"]}
    index = {"Fn::Join": ["", [table_arn, "/index/by-status"]]}
    assert any(
        s["Action"] == "dynamodb:Query" and s["Resource"] == index
        for s in _statements_of(synthesized, stack.router.role)
    )


def test_the_reconciler_runs_every_five_minutes(synthesized: Synthesized) -> None:
    function = _function(synthesized, synthesized.stack.reconciler.function)
    (rule,) = [
        r
        for r in synthesized.resources("AWS::Events::Rule").values()
        if "ScheduleExpression" in r["Properties"]
    ]
    assert rule["Properties"]["ScheduleExpression"] == "rate(5 minutes)"
    (target,) = rule["Properties"]["Targets"]
    assert target["Arn"] == {
        "Fn::GetAtt": [synthesized.logical_id(synthesized.stack.reconciler.function), "Arn"]
    }
    environment = {
        name: value if isinstance(value, str) else f"<{name} resolved at deploy>"
        for name, value in function["Properties"]["Environment"]["Variables"].items()
    }
    settings = load_settings(ReconcilerSettings, environment)  # the function's settings accept it
    assert settings.github_app_id == 123456


def _grants(synthesized: Synthesized, role: Construct) -> list[tuple[tuple[str, ...], str, str]]:
    """(actions, resource, condition) of every Allow statement of ``role``'s policies."""
    return sorted(
        (
            tuple(sorted(_as_list(statement["Action"]))),
            repr(statement["Resource"]),
            repr(statement.get("Condition")),
        )
        for statement in _statements_of(synthesized, role)
        if statement["Effect"] == "Allow"
    )


def test_the_agent_task_role_may_invoke_the_gateway_and_mount_its_file_system_and_nothing_else(
    synthesized: Synthesized,
) -> None:
    stack = synthesized.stack
    role = stack.agents.task_definition.task_role
    assert isinstance(role, Construct)
    gateway = {"Fn::GetAtt": [synthesized.logical_id(stack.agents.gateway), "Arn"]}
    file_system = stack.resolve(stack.agents.file_system.file_system_arn)
    access_points = stack.resolve(stack.agents.access_points_arn)
    # The whole grant table: the gateway (which checks the launch secret) and the agents' file
    # system through an access point, never its root (each repository's task definition mounts
    # its own). No registry, queue, secret or metric rights: a shell
    # that reaches the task's credentials reaches nothing that is not behind the secret.
    assert _grants(synthesized, role) == sorted(
        [
            (
                ("lambda:InvokeFunction",),
                repr([gateway, {"Fn::Join": ["", [gateway, ":*"]]}]),
                "None",
            ),
            (
                (
                    "elasticfilesystem:ClientMount",
                    "elasticfilesystem:ClientRootAccess",
                    "elasticfilesystem:ClientWrite",
                ),
                repr(file_system),
                repr(
                    {
                        "ArnLike": {"elasticfilesystem:AccessPointArn": access_points},
                        "Bool": {"elasticfilesystem:AccessedViaMountTarget": "true"},
                    }
                ),
            ),
        ]
    )
    text = repr(_statements_of(synthesized, role))
    for other in (
        stack.registry.table,
        stack.events.queue,
        stack.secrets.private_key,
        stack.secrets.copilot_token,
    ):
        assert synthesized.logical_id(other) not in text  # no statement names another agent's items


def test_the_gateway_role_holds_what_tasks_may_reach_through_it(synthesized: Synthesized) -> None:
    stack = synthesized.stack
    gateway = stack.agents.gateway
    assert isinstance(gateway.role, Construct)
    table = {"Fn::GetAtt": [synthesized.logical_id(stack.registry.table), "Arn"]}
    queue = {"Fn::GetAtt": [synthesized.logical_id(stack.events.queue), "Arn"]}
    grants = _grants(synthesized, gateway.role)
    actions = {g[0] for g in grants}
    assert (tuple(sorted(GATEWAY_REGISTRY_ACTIONS)), repr(table), "None") in grants  # item-level only
    index = {"Fn::Join": ["", [table, "/index/by-status"]]}
    assert (("dynamodb:Query",), repr(index), "None") in grants  # the janitor's page of finished agents
    assert [g for g in grants if "dynamodb:" in repr(g[0])] == sorted(
        [
            (tuple(sorted(GATEWAY_REGISTRY_ACTIONS)), repr(table), "None"),
            (("dynamodb:Query",), repr(index), "None"),
        ]
    )
    assert (("sqs:SendMessage",), repr(queue), "None") in grants
    assert "dynamodb:Scan" not in repr(actions) and "dynamodb:DeleteTable" not in repr(actions)
    secrets = sorted(
        repr(resource)
        for statement in _statements_of(synthesized, gateway.role)
        if "secretsmanager:GetSecretValue" in _as_list(statement["Action"])
        for resource in (
            statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        )
    )
    byok = [secret for secret in secrets if ":secret:squadron/byok/*" in secret]
    assert len(secrets) == 3 and len(byok) == 1  # BYOK keys by their prefix only
    assert [secret for secret in secrets if secret not in byok] == sorted(
        repr({"Ref": synthesized.logical_id(secret)})
        for secret in (stack.secrets.private_key, stack.secrets.copilot_token)
    )


def test_the_gateway_finds_the_copilot_token_secret(synthesized: Synthesized) -> None:
    function = _function(synthesized, synthesized.stack.agents.gateway)
    environment = function["Properties"]["Environment"]["Variables"]
    token = synthesized.stack.secrets.copilot_token
    assert environment["COPILOT_GITHUB_TOKEN_SECRET"] == {"Ref": synthesized.logical_id(token)}


def test_the_gateway_keeps_finished_agents_state_for_the_stages_retention(synthesized: Synthesized) -> None:
    function = _function(synthesized, synthesized.stack.agents.gateway)
    environment = {
        name: value if isinstance(value, str) else f"<{name} resolved at deploy>"
        for name, value in function["Properties"]["Environment"]["Variables"].items()
    }
    assert environment["SQUADRON_STATE_RETENTION_DAYS"] == "3"  # the context's state_retention_days
    assert load_settings(GatewaySettings, environment).state_retention_days == 3


def test_the_router_makes_a_repositorys_access_point_and_task_definition_and_nothing_wider(
    synthesized: Synthesized,
) -> None:
    """A repository's first launch makes its access point (on the agents' file system only,
    tagged) and its task definition (in the repositories' families only, tagged, naming only the
    agent task's two roles); no new action on '*' but the read-only DescribeTaskDefinition,
    which ECS does not scope."""
    stack = synthesized.stack
    grants = _grants(synthesized, stack.router.role)
    file_system = repr(stack.resolve(stack.agents.file_system.file_system_arn))
    family = stack.agents.task_definition.family
    new_actions = {
        "elasticfilesystem:CreateAccessPoint",
        "elasticfilesystem:DescribeAccessPoints",
        "elasticfilesystem:TagResource",
        "ecs:RegisterTaskDefinition",
        "ecs:DescribeTaskDefinition",
        "ecs:RunTask",
        "iam:PassRole",
    }
    held = {action: (resource, condition) for actions, resource, condition in grants for action in actions}
    # The ECS task roles' PassRole (the pipelines' execution role has one of its own: test_infra_pipelines).
    held["iam:PassRole"] = next(
        (resource, condition)
        for actions, resource, condition in grants
        if "iam:PassRole" in actions and "ecs-tasks" in condition
    )
    assert new_actions <= set(held)
    assert not [action for actions, _, _ in grants for action in actions if action.endswith("*")]
    assert held["elasticfilesystem:CreateAccessPoint"][0] == file_system
    assert "aws:RequestTag/squadron:repo" in held["elasticfilesystem:CreateAccessPoint"][1]
    assert held["elasticfilesystem:DescribeAccessPoints"][0] == file_system
    assert ":access-point/*" in held["elasticfilesystem:TagResource"][0]
    assert "'elasticfilesystem:CreateAction': 'CreateAccessPoint'" in held["elasticfilesystem:TagResource"][1]
    repo_families = f"task-definition/{family}-repo-*"
    assert repo_families in held["ecs:RegisterTaskDefinition"][0]
    assert "aws:RequestTag/squadron:repo" in held["ecs:RegisterTaskDefinition"][1]
    assert repo_families in held["ecs:RunTask"][0] and "ecs:cluster" in held["ecs:RunTask"][1]
    wildcard = [action for action, (resource, _) in held.items() if resource == "'*'"]
    assert sorted(a for a in wildcard if a in new_actions) == ["ecs:DescribeTaskDefinition"]
    task = stack.agents.task_definition
    passed: set[str] = set()
    for role in (task.task_role, task.execution_role):
        assert isinstance(role, Construct)
        passed.add(synthesized.logical_id(role))
    for logical_id in passed:
        assert logical_id in held["iam:PassRole"][0]
    assert "ecs-tasks.amazonaws.com" in held["iam:PassRole"][1]
    environment = _function(synthesized, stack.router.function)["Properties"]["Environment"]["Variables"]
    assert environment["AGENT_FILE_SYSTEM_ID"] == stack.resolve(stack.agents.file_system.file_system_id)
