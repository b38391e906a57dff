"""`squadron doctor` against an account as AWS would answer: moto where it implements the API
(STS, SSM, CloudFormation, Secrets Manager), botocore's Stubber (requests and answers checked
against the service models) where it does not (Lambda's GetAccountSettings, Service Quotas for
Fargate); the webhook URL served by the real ingress handler on loopback; GitHub the local
sandbox (which checks the App's JWT against the App's public key, as GitHub does) posting signed
webhooks to that ingress; Docker a stand-in command that answers as the docker CLI does."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.stub import Stubber
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from moto import mock_aws

from squadron import deploy_cli
from squadron.adapters.preflight import AwsFacts
from squadron.cli import main
from squadron.domain.app_manifest import app_events, app_permissions
from squadron.local.examples import first_examples
from squadron.local.sandbox import GitHubSandbox
from tests.support.lambdas import FakeLambdaContext, http_api_event, load_handler


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _pem(key: rsa.RSAPrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()


def _public(key: rsa.RSAPrivateKey) -> str:
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


#: The App's private key (the stack's secret holds it) and another App's.
APP_KEY, OTHER_KEY = _key(), _key()
PEM = _pem(APP_KEY)
TOKEN = "ghp_" + "a" * 36


FUNCTION: dict[str, Any] = {"Type": "AWS::Lambda::Function", "Properties": {}}


#: What the Lambda concurrency budget is read from, shaped as `cdk synth` writes it for the default
#: settings (tests/infra checks the real template's budget against these same draws).
TEMPLATE: dict[str, Any] = {
    "Resources": {
        "IngressFunctionCC445980": FUNCTION,
        "RouterFunction0F681190": FUNCTION,
        "ReconcilerFunction0432B6FF": FUNCTION,
        "DomainEventsPublisher0CA0A7C3": FUNCTION,
        "DashboardsFunction1FE984F2": FUNCTION,
        "AgentsGateway6342F301": FUNCTION,
        "IngressApiPOSTwebhookWebhookPermission4C5F313C": {
            "Type": "AWS::Lambda::Permission",
            "Properties": {
                "Principal": "apigateway.amazonaws.com",
                "FunctionName": {"Fn::GetAtt": ["IngressFunctionCC445980", "Arn"]},
            },
        },
        "RouterFunctionSqsEventSource": {
            "Type": "AWS::Lambda::EventSourceMapping",
            "Properties": {
                "FunctionName": {"Ref": "RouterFunction0F681190"},
                "ScalingConfig": {"MaximumConcurrency": 5},
            },
        },
        "DashboardsFunctionSqsEventSource": {
            "Type": "AWS::Lambda::EventSourceMapping",
            "Properties": {
                "FunctionName": {"Ref": "DashboardsFunction1FE984F2"},
                "ScalingConfig": {"MaximumConcurrency": 2},
            },
        },
        "DomainEventsPublisherDynamoDBEventSource": {
            "Type": "AWS::Lambda::EventSourceMapping",
            "Properties": {
                "FunctionName": {"Ref": "DomainEventsPublisher0CA0A7C3"},
                "EventSourceArn": {"Fn::GetAtt": ["RegistryTableDB777839", "StreamArn"]},
                "StartingPosition": "TRIM_HORIZON",
            },
        },
        "RegistryTableDB777839": {
            "Type": "AWS::DynamoDB::GlobalTable",
            "Properties": {
                "BillingMode": "PAY_PER_REQUEST",
                "StreamSpecification": {"StreamViewType": "NEW_IMAGE"},
            },
        },
        "ReconcilerSchedule268E39F0": {
            "Type": "AWS::Events::Rule",
            "Properties": {
                "ScheduleExpression": "rate(5 minutes)",
                "Targets": [{"Arn": {"Fn::GetAtt": ["ReconcilerFunction0432B6FF", "Arn"]}, "Id": "Target0"}],
            },
        },
        "AgentsAgentTask7D3746EF": {
            "Type": "AWS::ECS::TaskDefinition",
            "Properties": {
                "ContainerDefinitions": [
                    {
                        "Environment": [
                            {"Name": "AGENT_GATEWAY_FUNCTION", "Value": {"Ref": "AgentsGateway6342F301"}}
                        ]
                    }
                ]
            },
        },
    }
}
DRAWS = (
    "DashboardsFunction 2 (queue, MaximumConcurrency); "
    "DomainEventsPublisher 4 (stream of RegistryTable: 4 shards x ParallelizationFactor 1); "
    "ReconcilerFunction 1 (schedule); RouterFunction 5 (queue, MaximumConcurrency)"
)


@dataclass
class Account:
    """What the account holds; each test changes what it is about."""

    bootstrap: int | None = 28
    lambda_limits: tuple[int, int] = (1000, 1000)
    fargate_vcpus: float | None = 6.0  # None: no applied value, AWS's default (4000) answers
    docker: str = "ok"  # ok | down | absent
    stack: bool = True
    deployed_app: str = "4242"
    secrets: dict[str, str] = field(
        default_factory=lambda: {"key": PEM, "hook": "a-webhook-secret", "copilot": TOKEN}
    )
    ingress_secret_readable: bool = True
    ecs_service_role: bool = True
    synthesized: bool = True  # cdk.out holds the stage's template (make deploy synthesizes first)
    # GitHub: the App as its settings page has it (checked with --installed-on).
    github_key: str = "same"  # same | other: the key GitHub knows is the stored key, or another App's
    github_app_id: int = 4242
    github_slug: str = "acme-bot"
    github_permissions: dict[str, str] | None = None  # None: the manifest's
    github_events: list[str] | None = None  # None: the manifest's
    installation_permissions: dict[str, str] | None = None  # None: the manifest's
    installed: dict[str, bool] = field(default_factory=lambda: {"octo/app": True, "octo/elsewhere": False})
    github_webhook_secret: str | None = None  # None: the one the stack holds
    github_webhook_url: str | None = None  # None: the stack's WebhookUrl
    deliveries: int = 1  # webhooks GitHub sends before the doctor runs (a person opens issues)
    hook_stored: bool = False  # a value was stored in the webhook secret after the deploy


class Ingress(BaseHTTPRequestHandler):
    """The ingress Lambda behind an HTTP listener, as API Gateway runs it."""

    handler_module: Any = None

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        event = http_api_event(body, dict(self.headers.items()), path=self.path)
        answer = self.handler_module.handler(event, FakeLambdaContext())
        payload = answer.get("body", "").encode()
        self.send_response(answer["statusCode"])
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        pass


def _docker(tmp_path: Path, how: str) -> str:
    if how == "absent":
        return str(tmp_path / "no-such-docker")
    script = tmp_path / "docker"
    if how == "ok":
        script.write_text('#!/bin/sh\n[ "$1" = version ] && echo 27.3.1\n')
    else:
        script.write_text(
            "#!/bin/sh\necho 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock. "
            "Is the docker daemon running?' >&2\nexit 1\n"
        )
    script.chmod(0o755)
    return str(script)


@dataclass
class Doctor:
    tmp_path: Path
    account: Account
    stubs: list[Stubber] = field(default_factory=list)
    provisioned: bool = False
    servers: list[ThreadingHTTPServer] = field(default_factory=list)
    github: GitHubSandbox | None = None

    def run(self, *options: str, context: dict[str, Any] | None = None) -> tuple[int, list[str]]:
        path = self.tmp_path / "cdk.context.json"
        template = self.tmp_path / "cdk.out" / "Squadron-prod.template.json"
        if self.account.synthesized:
            template.parent.mkdir(exist_ok=True)
            template.write_text(json.dumps(TEMPLATE))
        else:
            template.unlink(missing_ok=True)
        path.write_text(
            json.dumps(context or {"stage": "prod", "github_app_id": "4242", "github_app_slug": "acme-bot"})
        )
        out = io.StringIO()
        status = main(
            [
                "doctor",
                "--file",
                str(path),
                "--docker",
                _docker(self.tmp_path, self.account.docker),
                *options,
            ],
            out=out,
        )
        return status, out.getvalue().splitlines()


def _stubbed(account: Account) -> dict[str, Any]:
    lambda_client = boto3.client("lambda", region_name="us-east-1")
    limit, unreserved = account.lambda_limits
    with_lambda = Stubber(lambda_client)
    with_lambda.add_response(
        "get_account_settings",
        {
            "AccountLimit": {
                "TotalCodeSize": 80530636800,
                "CodeSizeUnzipped": 262144000,
                "CodeSizeZipped": 52428800,
                "ConcurrentExecutions": limit,
                "UnreservedConcurrentExecutions": unreserved,
            },
            "AccountUsage": {"TotalCodeSize": 0, "FunctionCount": 0},
        },
        {},
    )
    quotas_client = boto3.client("service-quotas", region_name="us-east-1")
    with_quotas = Stubber(quotas_client)
    asked = {"ServiceCode": "fargate", "QuotaCode": "L-3032A538"}
    quota = {
        "ServiceCode": "fargate",
        "QuotaCode": "L-3032A538",
        "QuotaName": "Fargate On-Demand vCPU resource count",
    }
    if account.fargate_vcpus is None:
        with_quotas.add_client_error("get_service_quota", "NoSuchResourceException", expected_params=asked)
        with_quotas.add_response(
            "get_aws_default_service_quota", {"Quota": {**quota, "Value": 4000.0}}, asked
        )
    else:
        with_quotas.add_response(
            "get_service_quota", {"Quota": {**quota, "Value": account.fargate_vcpus}}, asked
        )
    with_lambda.activate()
    with_quotas.activate()
    return {"lambda": lambda_client, "service-quotas": quotas_client, "_stubs": [with_lambda, with_quotas]}


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Doctor, Account]]:
    account = Account()
    doctor = Doctor(tmp_path, account)
    with mock_aws():

        def build(settings: Any, aws: AwsFacts, **options: Any) -> Any:
            """The real doctor, over the account as it stands when it runs."""
            clients = _stubbed(account)
            doctor.stubs = clients.pop("_stubs")
            if not doctor.provisioned:
                doctor.servers += _provision(account, monkeypatch)
                doctor.github = _github(account, tmp_path)
                doctor.provisioned = True
            if doctor.github is not None:
                options["github"] = replace(options["github"], api_url=doctor.github.base_url)
            return real_doctor(settings, AwsFacts(region="us-east-1", clients=clients), **options)

        real_doctor = deploy_cli.doctor
        monkeypatch.setattr(deploy_cli, "doctor", build)
        yield doctor, account
        for server in doctor.servers:
            server.shutdown()
            server.server_close()
        if doctor.github is not None:
            doctor.github.stop()


def _github(account: Account, tmp_path: Path) -> GitHubSandbox | None:
    """GitHub with the App as ``account`` says, its webhook pointed at the stack's ingress; a person
    opens ``account.deliveries`` issues, each a signed delivery the ingress answers."""
    if not account.stack:
        return None
    outputs = {
        o["OutputKey"]: o["OutputValue"]
        for o in boto3.client("cloudformation").describe_stacks(StackName="Squadron-prod")["Stacks"][0][
            "Outputs"
        ]
    }
    key = APP_KEY if account.github_key == "same" else OTHER_KEY
    github = GitHubSandbox(
        tmp_path / "github",
        app_id=account.github_app_id,
        app_slug=account.github_slug,
        webhook_url=account.github_webhook_url or outputs["WebhookUrl"],
        webhook_secret=account.secrets["hook"]
        if account.github_webhook_secret is None
        else account.github_webhook_secret,
        examples=first_examples(),
        app_public_key=_public(key),
    )
    if account.github_permissions is not None:
        github.app_permissions = dict(account.github_permissions)
    if account.github_events is not None:
        github.app_events = list(account.github_events)
    if account.installation_permissions is not None:
        github.installation_permissions = dict(account.installation_permissions)
    for name, installed in account.installed.items():
        github.add_repository(name, {"README.md": "hi\n"}).installed = installed
    base = github.start()
    for number in range(account.deliveries):
        answer = httpx.post(
            f"{base}/repos/octo/app/issues",
            json={"title": f"issue {number}"},
            headers={"Authorization": "token human:alice"},
        )
        assert answer.status_code == 201, answer.text
    github.wait_for_deliveries()
    if account.hook_stored:
        boto3.client("secretsmanager").put_secret_value(
            SecretId=outputs["WebhookSecretName"], SecretString=account.secrets["hook"]
        )
    return github


def _provision(account: Account, monkeypatch: pytest.MonkeyPatch) -> list[ThreadingHTTPServer]:
    """The account's bootstrap and, when deployed, the stack: its secrets, its webhook URL."""
    if account.ecs_service_role:
        boto3.client("iam").create_service_linked_role(AWSServiceName="ecs.amazonaws.com")
    if account.bootstrap is not None:
        boto3.client("ssm").put_parameter(
            Name="/cdk-bootstrap/hnb659fds/version",
            Value=str(account.bootstrap),
            Type="String",
            Overwrite=True,
        )
    if not account.stack:
        return []
    secrets = boto3.client("secretsmanager")
    arns = {
        name: secrets.create_secret(Name=f"SecretsGenerated{name}-AbCdEf", SecretString=value)["Name"]
        for name, value in account.secrets.items()
    }
    sqs = boto3.client("sqs")
    queue = sqs.create_queue(QueueName="events.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    handler_module = load_handler("ingress")
    for key, value in {
        "EVENTS_QUEUE_URL": queue,
        "WEBHOOK_SECRET_ARN": arns["hook"] if account.ingress_secret_readable else "no-such-secret",
        "GITHUB_APP_ID": account.deployed_app,
        "GITHUB_APP_SLUG": "acme-bot",
    }.items():
        monkeypatch.setenv(key, value)
    handler_module.ingress.cache_clear()
    Ingress.handler_module = handler_module
    server = ThreadingHTTPServer(("127.0.0.1", 0), Ingress)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    outputs = {
        "WebhookUrl": f"http://127.0.0.1:{server.server_address[1]}/webhook",
        "GitHubAppPrivateKeySecretName": arns["key"],
        "WebhookSecretName": arns["hook"],
        "CopilotTokenSecretName": arns["copilot"],
        "GitHubAppId": account.deployed_app,
    }
    template = {
        "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {key: {"Value": value} for key, value in outputs.items()},
    }
    boto3.client("cloudformation").create_stack(StackName="Squadron-prod", TemplateBody=json.dumps(template))
    return [server]


def test_a_deployed_and_configured_stack_lacks_nothing(world: tuple[Doctor, Account]) -> None:
    doctor, _ = world
    status, lines = doctor.run()
    assert status == 0, lines
    assert [line.split(":")[0] for line in lines[:-1]] == [
        "ok      AWS credentials",
        "ok      CDK bootstrap",
        "ok      Lambda concurrency",
        "ok      Fargate vCPU quota",
        "ok      ECS service role",
        "ok      Docker",
        "ok      GitHub App",
        "ok      App private key",
        "ok      webhook secret",
        "ok      Copilot token",
        "ok      webhook URL",
        "ok      App identity",
        "ok      App permissions",
        "ok      App webhook",
    ]
    assert "ok      App identity: signed in as App 4242 (acme-bot) with the stored key" in lines
    assert (
        "ok      App webhook: posts to the WebhookUrl; the latest delivery (issues) was accepted, signed with "
        "the secret in SecretsGeneratedhook-AbCdEf"
    ) in lines
    assert "ok      Fargate vCPU quota: 6 vCPU: up to 6 agent tasks at once" in lines
    assert (
        f"ok      Lambda concurrency: 1000 of 1000 unreserved: at most 12 taken by {DRAWS}, up to 6 by "
        "AgentsGateway (one call at a time per agent task); 982 stay free for the ingress"
    ) in lines
    assert "ok      GitHub App: id 4242, acting as acme-bot[bot]" in lines
    assert [line for line in lines if "answers (401 to an unsigned request, as it should)" in line]
    assert lines[-1] == "nothing missing"
    for stub in doctor.stubs:  # each API asked once, as its model describes
        stub.assert_no_pending_responses()
    assert not [
        line for line in lines if PEM.splitlines()[1] in line or TOKEN in line or "a-webhook-secret" in line
    ]


CASES = [
    # (case id, the account, what the doctor must say (one line each, by prefix), exit status,
    #  exit status with --before-deploy)
    (
        "fresh-account",
        Account(bootstrap=None, stack=False),
        [
            "missing CDK bootstrap: us-east-1 is not bootstrapped (no /cdk-bootstrap/hnb659fds/version): "
            "npx cdk bootstrap aws://123456789012/us-east-1",
            "skip    secrets and webhook URL: Squadron-prod is not deployed yet (make deploy)",
        ],
        1,
        1,
    ),
    (
        "old-bootstrap",
        Account(bootstrap=5, stack=False),
        ["missing CDK bootstrap: version 5 in us-east-1 is older than 6"],
        1,
        1,
    ),
    (
        "low-lambda-quota",
        Account(lambda_limits=(10, 7), stack=False),
        [
            f"missing Lambda concurrency: 7 of 10 unreserved, 12 taken at most by {DRAWS}: 0 left for the "
            "ingress, 2 needed; no router_max_concurrency makes room (2 is the least SQS allows): ask AWS for "
            "more (Service Quotas: lambda L-B99A9384)",
        ],
        1,
        1,
    ),
    (
        # Every event source, the stream's 4 shards, the schedule: 12, more than a new account's 10,
        # and GitHub does not re-send a webhook the ingress had no execution for.
        "new-account-quota-of-10",
        Account(lambda_limits=(10, 10), stack=False),
        [
            f"missing Lambda concurrency: 10 of 10 unreserved, 12 taken at most by {DRAWS}: 0 left for the "
            "ingress, 2 needed; no router_max_concurrency makes room"
        ],
        1,
        1,
    ),
    (
        # 2 short: the router's share of 5 can give them (3 is still at least SQS's 2).
        "router-share-makes-room",
        Account(lambda_limits=(12, 12), stack=False),
        [
            f"missing Lambda concurrency: 12 of 12 unreserved, 12 taken at most by {DRAWS}: 0 left for the "
            "ingress, 2 needed; lower router_max_concurrency (squadron configure --set router_max_concurrency=3) "
            "or ask AWS for more"
        ],
        1,
        1,
    ),
    (
        "agents-crowd-out-the-ingress",
        Account(lambda_limits=(18, 18), stack=False),
        [
            f"warn    Lambda concurrency: 18 of 18 unreserved, 12 taken at most by {DRAWS}; 6 agent tasks at "
            "once calling AgentsGateway (one call at a time per agent task) would leave the ingress 0 of the 2"
        ],
        0,
        0,
    ),
    (
        "not-synthesized",
        Account(synthesized=False, stack=False),
        ["warn    Lambda concurrency: could not be read: no synthesized template at "],
        0,
        0,
    ),
    (
        "no-fargate-vcpu",
        Account(fargate_vcpus=0.0, stack=False),
        ["missing Fargate vCPU quota: 0 vCPU: no agent task (1 vCPU) can start"],
        1,
        1,
    ),
    (
        "fargate-default-quota",
        Account(fargate_vcpus=None, stack=False),
        ["ok      Fargate vCPU quota: 4000 vCPU: up to 4000 agent tasks at once"],
        0,
        0,
    ),
    (
        "docker-engine-down",
        Account(docker="down", stack=False),
        [
            "missing Docker: the Docker engine does not answer: Cannot connect to the Docker daemon at "
            "unix:///var/run/docker.sock. Is the docker daemon running?: `cdk deploy` builds the agent image with it"
        ],
        1,
        1,
    ),
    ("no-docker", Account(docker="absent", stack=False), ["missing Docker: no `"], 1, 1),
    (
        "first-ecs-cluster-of-the-account",
        Account(ecs_service_role=False, stack=False),
        [
            "ok      ECS service role: AWSServiceRoleForECS does not exist yet (this account's first ECS "
            "cluster): the stack creates it before its cluster"
        ],
        0,
        0,
    ),
    (
        "placeholders-after-first-deploy",
        Account(secrets={"key": "Xq3-random-placeholder", "hook": "generated", "copilot": "placeholder"}),
        [
            "missing App private key: SecretsGeneratedkey-AbCdEf holds its placeholder, not a PEM key",
            "warn    Copilot token: SecretsGeneratedcopilot-AbCdEf holds its placeholder",
        ],
        1,
        0,
    ),
    (
        "deployed-before-the-app",
        Account(deployed_app="0"),
        [
            "missing deployed App: Squadron-prod runs with github_app_id 0, the deployment says 4242: make deploy"
        ],
        1,
        0,
    ),
    # The App as GitHub knows it, asked with the stored key (the sandbox checks the JWT as GitHub).
    (
        "stored-key-is-another-apps",
        Account(github_key="other"),
        [
            "missing App identity: GitHub refused the App's JWT (iss 4242, signed with the key in "
            "SecretsGeneratedkey-AbCdEf): 401 A JSON web token could not be decoded; the key is not App "
            "4242's, or 4242 is another App's id"
        ],
        1,
        0,
    ),
    (
        "configured-id-is-another-apps",
        Account(github_app_id=5151),
        ["missing App identity: GitHub refused the App's JWT (iss 4242"],
        1,
        0,
    ),
    (
        "configured-slug-is-not-the-apps",
        Account(github_slug="acme"),
        [
            "missing App identity: App 4242 is 'acme' on GitHub, the deployment says 'acme-bot': the functions "
            "would not know acme[bot]'s own doings (squadron configure --github-app-slug acme, then make deploy)"
        ],
        1,
        0,
    ),
    (
        "app-lacks-permissions",
        Account(
            github_permissions={
                **{k: v for k, v in app_permissions().items() if k != "merge_queues"},
                "issues": "read",
            }
        ),
        ["missing App permissions: App acme-bot lacks issues: write, merge_queues: write (the manifest's"],
        1,
        0,
    ),
    (
        "app-not-subscribed-to-an-event",
        Account(github_events=[e for e in app_events() if e != "merge_group"]),
        ["missing App permissions: App acme-bot is not subscribed to merge_group"],
        1,
        0,
    ),
    (
        "stack-holds-another-webhook-secret",
        Account(github_webhook_secret="the-secret-github-was-given"),
        [
            "missing App webhook: GitHub's latest delivery (issues, ",
            "ok      webhook URL: ",  # the unsigned ping proves nothing about the secret
        ],
        1,
        0,
    ),
    (
        "webhook-posts-elsewhere",
        Account(github_webhook_url="https://old.example.com/webhook", deliveries=0),
        [
            "missing App webhook: the App's webhook posts to https://old.example.com/webhook, the stack's "
            "WebhookUrl is http://127.0.0.1:"
        ],
        1,
        0,
    ),
    (
        "generated-secret-and-no-delivery-yet",
        Account(deliveries=0),
        [
            "warn    App webhook: SecretsGeneratedhook-AbCdEf still holds the placeholder the stack generated "
            "and GitHub has delivered nothing yet"
        ],
        0,
        0,
    ),
    (
        "stored-secret-and-no-delivery-yet",
        Account(deliveries=0, hook_stored=True),
        [
            "ok      App webhook: posts to the WebhookUrl with a secret; SecretsGeneratedhook-AbCdEf was stored"
        ],
        0,
        0,
    ),
    (
        "ingress-cannot-read-its-secret",
        Account(ingress_secret_readable=False),
        ["missing webhook URL: http://127.0.0.1:"],
        1,
        0,
    ),
]


@pytest.mark.parametrize(
    ("account", "said", "status", "before_deploy"),
    [row[1:] for row in CASES],
    ids=[row[0] for row in CASES],
)
def test_what_is_missing_is_said_in_one_line_each(
    world: tuple[Doctor, Account], account: Account, said: list[str], status: int, before_deploy: int
) -> None:
    doctor, current = world
    current.__dict__.update(account.__dict__)
    got, lines = doctor.run()
    for expected in said:
        assert [line for line in lines if line.startswith(expected)], (expected, lines)
    assert got == status, lines
    for stub in doctor.stubs:
        stub.assert_no_pending_responses()
    again, _ = doctor.run("--before-deploy")
    assert again == before_deploy


def test_each_repository_named_must_be_covered_by_an_installation_that_accepted_every_permission(
    world: tuple[Doctor, Account],
) -> None:
    doctor, _ = world
    status, lines = doctor.run(
        "--installed-on", "octo/app", "--installed-on", "octo/elsewhere", "--installed-on", "octo/nowhere"
    )
    assert status == 1
    assert "ok      installation on octo/app: installation 77 with every permission the App asks for" in lines
    for name in ("octo/elsewhere", "octo/nowhere"):
        assert (
            f"missing installation on {name}: the App is not installed there, or not for this repository "
            "(the App's page → Install App)"
        ) in lines


def test_an_installation_that_has_not_accepted_a_new_permission_is_missing(
    world: tuple[Doctor, Account],
) -> None:
    doctor, account = world
    account.installation_permissions = {k: v for k, v in app_permissions().items() if k != "merge_queues"}
    status, lines = doctor.run("--installed-on", "octo/app")
    assert status == 1
    assert (
        "missing installation on octo/app: installation 77 has not accepted merge_queues: write (its owner "
        "accepts the App's new permissions on the installation's settings page)"
    ) in lines


def test_without_credentials_it_says_so_and_what_it_could_not_check(
    world: tuple[Doctor, Account], monkeypatch: pytest.MonkeyPatch
) -> None:
    doctor, _ = world
    monkeypatch.setattr(AwsFacts, "identity", _no_credentials)
    status, lines = doctor.run(context={"stage": "prod"})
    assert status == 1
    assert lines == [
        "missing AWS credentials: no AWS credentials: aws configure, or AWS_PROFILE",
        "missing GitHub App: github_app_id is 0: the stack waits for its App (fine for the first deploy); "
        "create it (squadron app create "
        "--webhook-url <WebhookUrl> --stack Squadron-prod), then make deploy",
        "skip    the rest: needs AWS credentials",
        "2 missing: AWS credentials, GitHub App",
    ]


def _no_credentials(self: AwsFacts) -> Any:
    from squadron.adapters.preflight import PreflightError  # noqa: PLC0415

    raise PreflightError("no AWS credentials: aws configure, or AWS_PROFILE")


def test_a_placeholder_key_names_the_file_app_create_kept_for_the_stage(
    world: tuple[Doctor, Account], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key `squadron app create` wrote outside the checkout (issue 32 item 6) is found by the
    doctor: the line that says the stack's secret holds its placeholder names the file to store."""
    doctor, account = world
    account.secrets = {**account.secrets, "key": "Xq3-random-placeholder"}
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    kept = tmp_path / "config" / "squadron" / "prod" / "github-app" / "private-key.pem"
    _, before = doctor.run()
    kept.parent.mkdir(parents=True)
    kept.write_text(PEM)
    _, after = doctor.run()
    key_lines = [
        [line for line in lines if line.startswith("missing App private key")] for lines in (before, after)
    ]
    assert "kept the App's key" not in key_lines[0][0]
    assert key_lines[1] == [
        "missing App private key: SecretsGeneratedkey-AbCdEf holds its placeholder, not a PEM key; squadron app "
        f"create kept the App's key in {kept}: aws secretsmanager put-secret-value --secret-id "
        f"SecretsGeneratedkey-AbCdEf --secret-string file://{kept}"
    ]
