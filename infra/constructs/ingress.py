"""The webhook endpoint: HTTP API `POST /webhook` -> ingress Lambda -> events.fifo."""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
import jsii
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.constructs.layer import SharedLayer, function_code
from infra.settings import SquadronSettings

REPO_ROOT = Path(__file__).resolve().parents[2]
INGRESS_CODE = REPO_ROOT / "functions" / "ingress"

# HTTP API access log fields ($context variables of HTTP APIs, not REST APIs).
_ACCESS_LOG_FORMAT = json.dumps(
    {
        "requestId": "$context.requestId",
        "sourceIp": "$context.identity.sourceIp",
        "requestTime": "$context.requestTime",
        "routeKey": "$context.routeKey",
        "status": "$context.status",
        "protocol": "$context.protocol",
        "responseLength": "$context.responseLength",
        "integrationStatus": "$context.integrationStatus",
        "integrationLatency": "$context.integrationLatency",
        "integrationError": "$context.integrationErrorMessage",
    }
)

_RUNTIME_PIN_REASON = (
    "python3.12 on purpose: the shared layer's binary wheels (pydantic-core, cryptography) are "
    "installed for CPython 3.12; the runtime and the layer's pip target change together."
)

_XRAY_WILDCARD_REASON = (
    "The only Resource '*' is X-Ray's PutTraceSegments/PutTelemetryRecords, added by active "
    "tracing: X-Ray has no resource-level permissions for these actions."
)

_NO_AUTHORIZER_REASON = (
    "GitHub cannot send authorization headers with a webhook; each request is authenticated "
    "by its X-Hub-Signature-256 HMAC, verified in the ingress function (fails closed)."
)


@jsii.implements(apigwv2.IAccessLogSettings)
class _AccessLogSettings:
    def __init__(self, log_group: logs.ILogGroup) -> None:
        self._destination = apigwv2.LogGroupLogDestination(log_group)

    @property
    def destination(self) -> apigwv2.IAccessLogDestination:
        return self._destination

    @property
    def format(self) -> apigateway.AccessLogFormat:
        return apigateway.AccessLogFormat.custom(_ACCESS_LOG_FORMAT)


class WebhookIngress(Construct):
    """Receives GitHub's webhooks, verifies them and puts them on the event queue."""

    RUNTIME = SharedLayer.RUNTIME  # the layer's wheels are built for this runtime
    ARCHITECTURE = SharedLayer.ARCHITECTURE
    HANDLER = "handler.handler"
    MEMORY_SIZE_MB = 512  # docs/costs.md, "Cold starts": the cold path halves, cold starts cost the same
    #: X-Ray for the ingress is off: importing the X-Ray SDK was the largest part of its cold
    #: import, and its trace would show one SendMessage (docs/costs.md, "Cold starts"). True turns on
    #: active tracing; the handler builds its Tracer only then (squadron.shell.tracing).
    TRACING = False
    TIMEOUT = cdk.Duration.seconds(10)  # GitHub gives up on a delivery after 10 s
    ROUTE_PATH = "/webhook"
    POWERTOOLS_SERVICE_NAME = "ingress"

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: SquadronSettings,
        layer: lambda_.ILayerVersion,
        queue: sqs.IQueue,
        webhook_secret: secretsmanager.ISecret,
    ) -> None:
        super().__init__(scope, construct_id)
        self.function_log_group = logs.LogGroup(self, "FunctionLogs", retention=settings.log_retention)
        self.access_log_group = logs.LogGroup(self, "AccessLogs", retention=settings.log_retention)
        self.role = self._build_role()
        self.function = self._build_function(settings, layer, queue, webhook_secret)
        # Least privilege: send to the event queue, read the webhook secret; nothing else.
        queue.grant_send_messages(self.function)
        webhook_secret.grant_read(self.function)
        self.api = apigwv2.HttpApi(
            self, "Api", description="Squadron: GitHub App webhooks", create_default_stage=False
        )
        self.stage = self._build_stage(settings)
        self._build_route()
        self.webhook_url = f"{self.stage.url}{self.ROUTE_PATH.lstrip('/')}"

    def _build_role(self) -> iam.Role:
        # An own role instead of AWSLambdaBasicExecutionRole: it may write to this
        # function's log group only, not create or write to any log group.
        role = iam.Role(
            self,
            "FunctionRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Squadron ingress: enqueue verified webhooks",
        )
        self.function_log_group.grant_write(role)
        if self.TRACING:
            cdk.Validations.of(role).acknowledge(
                cdk.Acknowledgment(id="AwsSolutions-IAM5[Resource::*]", reason=_XRAY_WILDCARD_REASON)
            )
        return role

    def _build_function(
        self,
        settings: SquadronSettings,
        layer: lambda_.ILayerVersion,
        queue: sqs.IQueue,
        webhook_secret: secretsmanager.ISecret,
    ) -> lambda_.Function:
        function = lambda_.Function(
            self,
            "Function",
            description="Squadron: verify GitHub webhooks and enqueue them on events.fifo",
            runtime=self.RUNTIME,
            architecture=self.ARCHITECTURE,
            handler=self.HANDLER,
            code=function_code(INGRESS_CODE),
            layers=[layer],
            memory_size=self.MEMORY_SIZE_MB,
            timeout=self.TIMEOUT,
            role=self.role,
            log_group=self.function_log_group,
            tracing=lambda_.Tracing.ACTIVE if self.TRACING else lambda_.Tracing.DISABLED,
            environment={
                "POWERTOOLS_TRACE_DISABLED": "false" if self.TRACING else "true",
                "EVENTS_QUEUE_URL": queue.queue_url,
                "WEBHOOK_SECRET_ARN": webhook_secret.secret_arn,
                "GITHUB_APP_ID": settings.github_app_id,
                "GITHUB_APP_SLUG": settings.github_app_slug,
                "MAX_BODY_BYTES": str(settings.webhook_max_body_bytes),
                "POWERTOOLS_SERVICE_NAME": self.POWERTOOLS_SERVICE_NAME,
                "POWERTOOLS_METRICS_NAMESPACE": settings.metrics_namespace,
                "LOG_LEVEL": settings.log_level,
            },
        )
        cdk.Validations.of(function).acknowledge(
            cdk.Acknowledgment(id="AwsSolutions-L1", reason=_RUNTIME_PIN_REASON)
        )
        return function

    def _build_stage(self, settings: SquadronSettings) -> apigwv2.HttpStage:
        return apigwv2.HttpStage(
            self,
            "DefaultStage",
            http_api=self.api,
            stage_name="$default",
            auto_deploy=True,
            throttle=apigwv2.ThrottleSettings(
                rate_limit=settings.api_throttle_rate_limit,
                burst_limit=settings.api_throttle_burst_limit,
            ),
            access_log_settings=_AccessLogSettings(self.access_log_group),
        )

    def _build_route(self) -> None:
        routes = self.api.add_routes(
            path=self.ROUTE_PATH,
            methods=[apigwv2.HttpMethod.POST],
            integration=integrations.HttpLambdaIntegration("Webhook", self.function),
        )
        for route in routes:
            # On the route itself (AWS::ApiGatewayV2::Route), not the whole API.
            cdk.Validations.of(route.node.default_child or route).acknowledge(
                cdk.Acknowledgment(id="AwsSolutions-APIG4", reason=_NO_AUTHORIZER_REASON)
            )
