"""cdk-nag (AwsSolutions) and cfn-lint over the synthesized app."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_sqs as sqs

from infra.app import build
from tests.infra.synth import SETTINGS_CONTEXT, Synthesized, cdk_json_context

pytestmark = pytest.mark.infra

CFN_LINT = Path(sys.executable).with_name("cfn-lint")

# W3005 ("dependency already enforced by a GetAtt"): CDK adds an explicit DependsOn
# from each function to its role even when a GetAtt implies it. Every other warning
# and every error fails the test.
CFN_LINT_IGNORED = ("W3005",)

# Rule id -> the resource types it is acknowledged on (and nothing wider).
EXPECTED_ACKNOWLEDGEMENTS = {
    "AwsSolutions-SMG4": {"AWS::SecretsManager::Secret"},  # issued and rotated by GitHub
    "AwsSolutions-APIG4": {"AWS::ApiGatewayV2::Route"},  # authenticated by its HMAC signature
    "AwsSolutions-L1": {"AWS::Lambda::Function"},  # runtime pinned to the layer's CPython 3.12
    "AwsSolutions-ECS2": {"AWS::ECS::TaskDefinition"},
    # CDK's custom-resource provider (it creates ECS's service-linked role before the first cluster)
    "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]": {
        "AWS::IAM::Role"
    },  # names in the environment, no secrets
    # the publisher's failure destination (positions of events not published): no queue behind it
    "AwsSolutions-SQS3": {"AWS::SQS::Queue", "AWS::SQS::QueuePolicy"},
    # X-Ray, ecr:GetAuthorizationToken and dynamodb:ListStreams, which have no resource-level permissions
    "AwsSolutions-IAM5[Resource::*]": {"AWS::IAM::Role", "AWS::IAM::Policy"},
    # the router: RunTask on the agent task definition family, StopTask on the agent cluster's tasks
    "AwsSolutions-IAM5[Resource::<agent task definition family>:*]": {"AWS::IAM::Role", "AWS::IAM::Policy"},
    # the router: RunTask, RegisterTaskDefinition (tagged) on each repository's family; tags an
    # access point only as it creates it on the agents' file system
    "AwsSolutions-IAM5[Resource::<repository task definition families>*]": {
        "AWS::IAM::Role",
        "AWS::IAM::Policy",
    },
    "AwsSolutions-IAM5[Resource::<access points>/*]": {"AWS::IAM::Role", "AWS::IAM::Policy"},
    "AwsSolutions-IAM5[Resource::<agent cluster tasks>/*]": {"AWS::IAM::Role", "AWS::IAM::Policy"},
    # the router: ListTasks by a launch's startedBy (the resource type IAM names for ListTasks is
    # the cluster's container instances), conditioned on the agent cluster
    "AwsSolutions-IAM5[Resource::<agent cluster container instances>/*]": {
        "AWS::IAM::Role",
        "AWS::IAM::Policy",
    },
    # the agent task: invoke the agent gateway (and its versions); the gateway: read the BYOK keys
    # under their prefix
    "AwsSolutions-IAM5[Resource::<agent gateway>:*]": {"AWS::IAM::Role", "AWS::IAM::Policy"},
    "AwsSolutions-IAM5[Resource::<BYOK keys>/*]": {"AWS::IAM::Role", "AWS::IAM::Policy"},
    # the reconciler: the retrospective schedules of the stage's own schedule group
    "AwsSolutions-IAM5[Resource::<retrospective schedules>/*]": {"AWS::IAM::Role", "AWS::IAM::Policy"},
    # the pipelines: the stage's state machines (the reconciler and router publish them, the router
    # and a run's execution role start runs) and their runs (described, stopped: sub-pipelines)
    "AwsSolutions-IAM5[Resource::<pipeline state machines>_*]": {"AWS::IAM::Role", "AWS::IAM::Policy"},
    "AwsSolutions-IAM5[Resource::<pipeline runs>_*]": {"AWS::IAM::Role", "AWS::IAM::Policy"},
}

#: Finding ids that name generated logical ids, as the table above names them.
_GENERATED = [
    (
        re.compile(r"Resource::arn:[^\]]*:task-definition/[^\]]*:\*\]$"),
        "Resource::<agent task definition family>:*]",
    ),
    (re.compile(r"Resource::arn:[^\]]*:task/<\w*Cluster\w*>/\*\]$"), "Resource::<agent cluster tasks>/*]"),
    (
        re.compile(r"Resource::arn:[^\]]*:container-instance/<\w*Cluster\w*>/\*\]$"),
        "Resource::<agent cluster container instances>/*]",
    ),
    (
        re.compile(r"Resource::arn:[^\]]*:task-definition/[^\]]*-repo-\*\]$"),
        "Resource::<repository task definition families>*]",
    ),
    (
        re.compile(r"Resource::arn:[^\]]*:elasticfilesystem:[^\]]*:access-point/\*\]$"),
        "Resource::<access points>/*]",
    ),
    (re.compile(r"Resource::<\w*Gateway\w*\.Arn>:\*\]$"), "Resource::<agent gateway>:*]"),
    (
        re.compile(r"Resource::arn:[^\]]*:secretsmanager:[^\]]*:secret:squadron/byok/\*\]$"),
        "Resource::<BYOK keys>/*]",
    ),
    (
        re.compile(r"Resource::arn:[^\]]*:scheduler:[^\]]*:schedule/<\w*RetrospectiveSchedules\w*>/\*\]$"),
        "Resource::<retrospective schedules>/*]",
    ),
    (
        re.compile(r"Resource::arn:[^\]]*:states:[^\]]*:stateMachine:squadron-[a-z0-9-]+_\*\]$"),
        "Resource::<pipeline state machines>_*]",
    ),
    (
        re.compile(r"Resource::arn:[^\]]*:states:[^\]]*:execution:squadron-[a-z0-9-]+_\*\]$"),
        "Resource::<pipeline runs>_*]",
    ),
]


def _named(rule_id: str) -> str:
    for pattern, name in _GENERATED:
        rule_id = pattern.sub(name, rule_id)
    return rule_id


def test_app_synthesizes_with_zero_unacknowledged_nag_findings(synthesized: Synthesized) -> None:
    # The fixture's app.synth() raises ValidationFailed on any finding; this only
    # checks that the validation report recorded no violation either.
    report_path = synthesized.outdir / "validation-report.json"
    if report_path.exists():
        report = json.loads(report_path.read_text())
        assert all(plugin.get("success", True) for plugin in report.get("pluginReports", []))


def test_acknowledgements_are_narrow_and_explained(synthesized: Synthesized) -> None:
    acknowledged: dict[str, set[str]] = {}
    for resource in synthesized.template_json["Resources"].values():
        for rule in resource.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", []):
            if not rule["id"].startswith("AwsSolutions-"):
                continue  # aws-cdk-lib's own template-validation acknowledgements (VPC internals)
            acknowledged.setdefault(_named(rule["id"]), set()).add(resource["Type"])
            assert len(rule["reason"]) > 60, rule
    assert acknowledged == EXPECTED_ACKNOWLEDGEMENTS


def test_nag_rejects_a_non_compliant_resource(tmp_path: Path) -> None:
    app = cdk.App(context={**cdk_json_context(), **SETTINGS_CONTEXT}, outdir=str(tmp_path))
    stack = build(app)
    sqs.Queue(stack, "PlainQueue", encryption=sqs.QueueEncryption.UNENCRYPTED)
    with pytest.raises(Exception, match=r"AwsSolutions-SQS4"):
        app.synth()


def test_cfn_lint_finds_no_errors(synthesized: Synthesized) -> None:
    result = subprocess.run(
        [
            str(CFN_LINT),
            "--format",
            "json",
            "--ignore-checks",
            *CFN_LINT_IGNORED,
            "--",
            str(synthesized.template_path),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    matches = json.loads(result.stdout or "[]")
    problems = [f"{m['Rule']['Id']} {m['Message']} ({m['Location']['Path']})" for m in matches]
    assert problems == [], "\n".join(problems)
    assert result.returncode == 0, result.stderr
