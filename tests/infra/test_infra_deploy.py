"""What a first `cdk deploy` on a fresh account meets: nothing that fails at create time on a
low Lambda quota, secrets that never block a retry, alarms that can publish, a router that
cannot starve the ingress and whose timeouts fit its work."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest

from bench.capacity import Deployment
from infra.app import build
from infra.constructs.agents import AgentCompute
from infra.constructs.event_queue import EventQueue
from infra.constructs.reconciler import Reconciler
from infra.constructs.router import EventRouter
from squadron.deployment import AGENT_TASK_VCPUS
from squadron.domain.preflight import concurrency_budget, judge_lambda_concurrency
from squadron.settings import (
    LAMBDA_RATE_LIMIT_WAIT_SECONDS,
    ReconcilerSettings,
    RouterSettings,
    app_configured,
    load_settings,
)
from tests.infra.synth import Synthesized, cdk_json_context

pytestmark = pytest.mark.infra


def _scheduled(rules: dict[str, Any]) -> dict[str, Any]:
    """The rules on a schedule (the reconciler's tick; the domain events' rule has a pattern)."""
    return {name: rule for name, rule in rules.items() if "ScheduleExpression" in rule["Properties"]}


def _routers(synthesized: Synthesized) -> dict[str, Any]:
    """The router's mapping from events.fifo (the event publisher reads the table's stream, the
    dashboards function its own queue)."""
    router = {"Ref": synthesized.logical_id(synthesized.stack.router.function)}
    return {
        name: m
        for name, m in synthesized.resources("AWS::Lambda::EventSourceMapping").items()
        if m["Properties"]["FunctionName"] == router
    }


def _one(resources: dict[str, Any]) -> dict[str, Any]:
    (resource,) = resources.values()
    return dict(resource)


def test_no_function_reserves_concurrency(synthesized: Synthesized) -> None:
    """Reserved concurrency fails at create time when it would leave an account fewer than 10
    unreserved executions (a new account's quota is often 10)."""
    functions = synthesized.resources("AWS::Lambda::Function")
    assert functions
    assert {
        name: f["Properties"]["ReservedConcurrentExecutions"]
        for name, f in functions.items()
        if "ReservedConcurrentExecutions" in f["Properties"]
    } == {}


def test_reconciler_runs_never_overlap(synthesized: Synthesized) -> None:
    stack = synthesized.stack
    reconciler = synthesized.logical_id(stack.reconciler.function)
    function = synthesized.resources("AWS::Lambda::Function")[reconciler]
    configs = [
        c["Properties"]
        for c in synthesized.resources("AWS::Lambda::EventInvokeConfig").values()
        if c["Properties"]["FunctionName"] == {"Ref": reconciler}
    ]
    assert configs == [
        {
            "FunctionName": {"Ref": reconciler},
            "Qualifier": "$LATEST",
            "MaximumRetryAttempts": 0,
            "MaximumEventAgeInSeconds": 60,
        }
    ]
    (target,) = _one(_scheduled(synthesized.resources("AWS::Events::Rule")))["Properties"]["Targets"]
    tick_age = target["RetryPolicy"]["MaximumEventAgeInSeconds"]
    # Started as late as EventBridge and Lambda's queue allow, a run still ends before the next tick.
    latest_end = tick_age + configs[0]["MaximumEventAgeInSeconds"] + function["Properties"]["Timeout"]
    assert latest_end <= Reconciler.SCHEDULE.to_seconds() == 300


def test_secrets_have_generated_names_the_outputs_give(synthesized: Synthesized) -> None:
    """A fixed name outlives a deleted secret (its recovery window): the next deploy would fail."""
    secrets = synthesized.resources("AWS::SecretsManager::Secret")
    assert len(secrets) == 3
    assert [name for name, s in secrets.items() if "Name" in s["Properties"]] == []
    assert {(s["DeletionPolicy"], s["UpdateReplacePolicy"]) for s in secrets.values()} == {
        ("Delete", "Delete")
    }
    outputs = synthesized.template_json["Outputs"]
    stack = synthesized.stack
    for output, secret in (
        ("WebhookSecretName", stack.secrets.webhook_secret),
        ("GitHubAppPrivateKeySecretName", stack.secrets.private_key),
        ("CopilotTokenSecretName", stack.secrets.copilot_token),
    ):
        # The name is derived from the secret's ARN ({"Ref": ...}), so it is the generated one.
        assert f"'Ref': '{synthesized.logical_id(secret)}'" in str(outputs[output]["Value"]), output


def test_cloudwatch_may_publish_to_the_alarm_topic(synthesized: Synthesized) -> None:
    """A topic policy replaces the default one: enforce_ssl's Deny alone would allow nothing."""
    topic = synthesized.logical_id(synthesized.stack.observability.alarm_topic)
    policy = _one(synthesized.resources("AWS::SNS::TopicPolicy"))["Properties"]
    assert policy["Topics"] == [{"Ref": topic}]
    statements = policy["PolicyDocument"]["Statement"]
    allows = [s for s in statements if s["Effect"] == "Allow"]
    assert allows == [
        {
            "Sid": "AllowCloudWatchAlarmsToPublish",
            "Effect": "Allow",
            "Principal": {"Service": "cloudwatch.amazonaws.com"},
            "Action": "sns:Publish",
            "Resource": {"Ref": topic},
            "Condition": {
                "StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}},
                "ArnLike": {
                    "aws:SourceArn": {
                        "Fn::Join": [
                            "",
                            [
                                "arn:",
                                {"Ref": "AWS::Partition"},
                                ":cloudwatch:",
                                {"Ref": "AWS::Region"},
                                ":",
                                {"Ref": "AWS::AccountId"},
                                ":alarm:*",
                            ],
                        ]
                    }
                },
            },
        }
    ]
    denies = [s for s in statements if s["Effect"] == "Deny"]
    assert [d["Condition"] for d in denies] == [{"Bool": {"aws:SecureTransport": "false"}}]


def test_router_concurrency_is_bounded_by_the_setting(synthesized: Synthesized) -> None:
    mapping = _one(_routers(synthesized))["Properties"]
    assert mapping["ScalingConfig"] == {"MaximumConcurrency": 4}  # router_max_concurrency of the context


def test_the_history_retention_of_the_context_reaches_the_one_writer_of_events(
    synthesized: Synthesized,
) -> None:
    """The router commits every domain event (decisions and the merge gate's verdicts), so it
    alone stamps their items' expiry from history_days; no other function is told a retention."""
    functions = synthesized.resources("AWS::Lambda::Function")
    told = {
        logical_id: function["Properties"]["Environment"]["Variables"]["SQUADRON_HISTORY_DAYS"]
        for logical_id, function in functions.items()
        if "SQUADRON_HISTORY_DAYS" in function["Properties"].get("Environment", {}).get("Variables", {})
    }
    assert told == {synthesized.logical_id(synthesized.stack.router.function): "45"}  # the context's
    variables = functions[synthesized.logical_id(synthesized.stack.router.function)]["Properties"][
        "Environment"
    ]["Variables"]
    environment = {
        name: value if isinstance(value, str) else f"<{name}>" for name, value in variables.items()
    }
    assert load_settings(RouterSettings, {**environment, "GITHUB_APP_ID": "123456"}).history_days == 45


def test_router_batch_fits_its_timeout_and_the_queue_outlasts_retries(synthesized: Synthesized) -> None:
    router = synthesized.resources("AWS::Lambda::Function")[
        synthesized.logical_id(synthesized.stack.router.function)
    ]
    timeout = router["Properties"]["Timeout"]
    mapping = _one(_routers(synthesized))["Properties"]
    # Every record of a batch may wait out one GitHub rate limit and still be done in time.
    per_record = LAMBDA_RATE_LIMIT_WAIT_SECONDS + EventQueue.ROUTER_WORK_SECONDS
    assert mapping["BatchSize"] * per_record <= timeout
    assert (mapping["BatchSize"], timeout) == (EventRouter.BATCH_SIZE, 90)
    queue = synthesized.resources("AWS::SQS::Queue")[synthesized.logical_id(synthesized.stack.events.queue)]
    # AWS: a visibility timeout of at least six times the consuming function's timeout.
    assert queue["Properties"]["VisibilityTimeout"] >= 6 * timeout


def test_every_function_acting_on_the_apps_own_doings_knows_its_slug(synthesized: Synthesized) -> None:
    """The App's login is <slug>[bot] for the ingress (own events), the router (assignments, the
    merge gate's review counting) and the reconciler (replays of assignments)."""
    stack = synthesized.stack
    functions = synthesized.resources("AWS::Lambda::Function")
    settings: type[RouterSettings | ReconcilerSettings]
    for construct, settings in (
        (stack.router.function, RouterSettings),
        (stack.reconciler.function, ReconcilerSettings),
    ):
        variables = functions[synthesized.logical_id(construct)]["Properties"]["Environment"]["Variables"]
        assert variables["GITHUB_APP_SLUG"] == "squadron-ci"
        environment = {
            name: value if isinstance(value, str) else f"<{name}>" for name, value in variables.items()
        }
        assert load_settings(settings, environment).bot_login == "squadron-ci[bot]"
    ingress = functions[synthesized.logical_id(stack.ingress.function)]["Properties"]["Environment"][
        "Variables"
    ]
    assert ingress["GITHUB_APP_SLUG"] == "squadron-ci"


def test_the_doctor_counts_agents_by_the_task_definitions_vcpus() -> None:
    assert AgentCompute.TASK_CPU / 1024 == AGENT_TASK_VCPUS


#: The properties that fix a resource's physical name, by resource type.
NAME_PROPERTIES = (
    "Name",
    "TableName",
    "QueueName",
    "LogGroupName",
    "BucketName",
    "RepositoryName",
    "TopicName",
)


def test_nothing_left_behind_by_a_rollback_or_destroy_can_block_the_next_deploy(
    synthesized: Synthesized,
) -> None:
    """A retained resource outlives a rolled-back first deploy and `cdk destroy`: with a fixed
    name, the next deploy of the stage would fail on "already exists"."""
    retained = {
        name: resource
        for name, resource in synthesized.template_json["Resources"].items()
        if resource.get("DeletionPolicy") in ("Retain", "RetainExceptOnCreate")
    }
    assert retained  # the registry table, log groups, the sessions' file system
    fixed = {
        name: [key for key in NAME_PROPERTIES if key in resource.get("Properties", {})]
        for name, resource in retained.items()
    }
    assert {name: keys for name, keys in fixed.items() if keys} == {}


def test_a_first_deploy_before_the_app_exists_synthesizes_a_stack_that_waits_for_it(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The guide's first deploy (no App yet): every function that acts as the App gets id 0, which
    each recognises as "not configured yet" (tests/adapters: ingress 503, router holds, reconciler
    no-op) instead of failing on it."""
    app = cdk.App(
        context={**cdk_json_context(), "stage": "first"}, outdir=str(tmp_path_factory.mktemp("first"))
    )
    stack = build(app)
    template = app.synth().get_stack_artifact(stack.artifact_id).template
    functions = template["Resources"]
    for construct in (stack.ingress.function, stack.router.function, stack.reconciler.function):
        logical = stack.get_logical_id(construct.node.default_child)  # type: ignore[arg-type]
        variables = functions[logical]["Properties"]["Environment"]["Variables"]
        assert variables["GITHUB_APP_ID"] == "0"
        assert not app_configured(variables)


def test_an_accounts_first_cluster_waits_for_ecs_service_linked_role(synthesized: Synthesized) -> None:
    """An account's first ECS cluster can fail with "Unable to assume the service linked role" and
    roll the first deploy back (FINDINGS): the role is created first, and the cluster waits for it."""
    resources = synthesized.template_json["Resources"]
    creators = {
        name: json.loads(resource["Properties"]["Create"])
        for name, resource in resources.items()
        if resource["Type"] == "Custom::AWS" and "createServiceLinkedRole" in str(resource["Properties"])
    }
    assert [(call["service"], call["parameters"]) for call in creators.values()] == [
        ("IAM", {"AWSServiceName": "ecs.amazonaws.com"})
    ]
    (creator,) = creators
    # An account that already has the role answers InvalidInput: the deploy goes on.
    assert "InvalidInput" in creators[creator]["ignoreErrorCodesMatching"]
    assert "Delete" not in resources[creator]["Properties"]  # the account's role outlives the stack
    (cluster,) = synthesized.resources("AWS::ECS::Cluster")
    assert creator in resources[cluster].get("DependsOn", [])


def test_the_capacity_model_counts_every_draw_the_template_fixes(synthesized: Synthesized) -> None:
    """bench/capacity.py's Lambda bounds subtract what the stack fixes beside the router (the
    reconciler, the dashboards queue, the registry stream): the same draws the doctor reads here."""
    deployment = Deployment()
    draws = {d.function: d.executions for d in concurrency_budget(synthesized.template_json).draws}
    draws.pop("RouterFunction")  # the context's router_max_concurrency, a setting of the model's
    assert draws == {
        "DashboardsFunction": deployment.dashboards_max_concurrency,
        "DomainEventsPublisher": deployment.stream_executions,
        "ReconcilerFunction": deployment.reconciler_executions,
    }
    assert deployment.lambda_left(20) == 20 - deployment.router_max_concurrency - sum(
        n or 0 for n in draws.values()
    )


def test_the_doctor_reads_every_draw_on_lambda_concurrency_from_the_template(
    synthesized: Synthesized,
) -> None:
    """The doctor's budget is the template's, not a constant: every event source (with its bound),
    the stream (its table's shards times the mapping's ParallelizationFactor), the schedule, the
    function API Gateway invokes and the one agent tasks call."""
    budget = concurrency_budget(synthesized.template_json)
    assert [(d.function, d.source, d.executions) for d in budget.draws] == [
        ("DashboardsFunction", "queue, MaximumConcurrency", 2),
        # The registry is an on-demand table: a new one has 4 partitions, so its stream 4 shards.
        ("DomainEventsPublisher", "stream of RegistryTable: 4 shards x ParallelizationFactor 1", 4),
        ("ReconcilerFunction", "schedule", 1),
        ("RouterFunction", "queue, MaximumConcurrency", 4),  # router_max_concurrency of the context
    ]
    assert (budget.ingress, budget.gateway) == ("IngressFunction", "AgentsGateway")
    # A new account's quota of 10 fits no router share (2 + 2 + 4 + 1 leaves the ingress 1); 14
    # fits the default share (5) with the ingress's 2 left, 13 only a lowered one.
    for quota, share, status in (
        (10, 5, "missing"),
        (10, 2, "missing"),
        (13, 5, "missing"),
        (13, 4, "ok"),
        (14, 5, "ok"),
    ):
        resources = {**synthesized.template_json["Resources"], **_router_share(synthesized, share)}
        judged = judge_lambda_concurrency(
            quota, quota, concurrency_budget({"Resources": resources}), agents=None
        )
        assert judged.status == status, judged.line


@pytest.mark.parametrize(
    ("table", "factor", "executions"),
    [
        ({"BillingMode": "PAY_PER_REQUEST"}, 1, 4),  # a new on-demand table: 4,000 writes a second
        ({"BillingMode": "PAY_PER_REQUEST"}, 3, 12),
        ({"BillingMode": "PAY_PER_REQUEST", "WarmThroughput": {"WriteUnitsPerSecond": 10000}}, 1, 10),
        ({"BillingMode": "PAY_PER_REQUEST", "WarmThroughput": {"ReadUnitsPerSecond": 30001}}, 2, 22),
        ({"ProvisionedThroughput": {"ReadCapacityUnits": 5, "WriteCapacityUnits": 5}}, 1, 1),
        ({"ProvisionedThroughput": {"ReadCapacityUnits": 9000, "WriteCapacityUnits": 2500}}, 1, 3),
    ],
)
def test_the_stream_draws_its_table_s_shards_times_its_parallelization_factor(
    synthesized: Synthesized, table: dict[str, Any], factor: int, executions: int
) -> None:
    """The publisher's stream mapping takes one batch at a time per shard and ParallelizationFactor
    per shard: the budget follows the registry table's capacity and the mapping as the template
    has them (a stream whose shards the template does not fix is unbounded)."""
    resources = dict(synthesized.template_json["Resources"])
    (mapping_name,) = [
        name
        for name, r in resources.items()
        if r["Type"] == "AWS::Lambda::EventSourceMapping" and "StartingPosition" in r["Properties"]
    ]
    mapping = resources[mapping_name]
    table_name = mapping["Properties"]["EventSourceArn"]["Fn::GetAtt"][0]
    resources[mapping_name] = {
        **mapping,
        "Properties": {**mapping["Properties"], "ParallelizationFactor": factor},
    }
    resources[table_name] = {**resources[table_name], "Properties": {**table, "StreamSpecification": {}}}
    (publisher,) = [
        d for d in concurrency_budget({"Resources": resources}).draws if d.source.startswith("stream")
    ]
    assert publisher.executions == executions, publisher.text
    resources[mapping_name] = {
        **mapping,
        "Properties": {
            **mapping["Properties"],
            "EventSourceArn": "arn:aws:dynamodb:eu-west-1:1:table/x/stream/y",
        },
    }
    (unknown,) = [
        d for d in concurrency_budget({"Resources": resources}).draws if d.source.startswith("stream")
    ]
    assert unknown.executions is None, unknown.text


def _router_share(synthesized: Synthesized, executions: int) -> dict[str, Any]:
    (name, mapping) = next(iter(_routers(synthesized).items()))
    properties = {**mapping["Properties"], "ScalingConfig": {"MaximumConcurrency": executions}}
    return {name: {**mapping, "Properties": properties}}


def test_agent_state_backups_are_the_deployers_choice(
    synthesized: Synthesized, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """EFS automatic backups keep a removed agent's state 35 days past state_retention_days in a
    vault that outlives the stack (FINDINGS): off unless the deployment asks for them."""

    def backups(template: Any) -> list[str]:
        return [
            r["Properties"]["BackupPolicy"]["Status"]
            for r in template["Resources"].values()
            if r["Type"] == "AWS::EFS::FileSystem"
        ]

    assert backups(synthesized.template_json) == ["DISABLED"]
    app = cdk.App(
        context={**cdk_json_context(), "stage": "backed", "state_backups": "true"},
        outdir=str(tmp_path_factory.mktemp("backed")),
    )
    stack = build(app)
    assert backups(app.synth().get_stack_artifact(stack.artifact_id).template) == ["ENABLED"]


def test_account_global_names_are_unique_per_region(synthesized: Synthesized) -> None:
    """CloudWatch dashboards belong to the account, not the region: the same stage deployed in two
    regions must not share (and overwrite) one dashboard."""
    (dashboard,) = synthesized.resources("AWS::CloudWatch::Dashboard").values()
    separator, parts = dashboard["Properties"]["DashboardName"]["Fn::Join"]
    assert separator == ""
    assert parts[0] == "squadron-ci-"
    assert parts[1:] == [{"Ref": "AWS::Region"}]
