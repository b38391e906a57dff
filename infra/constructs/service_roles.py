"""The service-linked roles the stack's resources need before CloudFormation creates them.

ECS creates ``AWSServiceRoleForECS`` on an account's first use, and the first
``AWS::ECS::Cluster`` of an account can fail with "Unable to assume the service linked role"
while that role is not ready yet, rolling the whole first deploy back (FINDINGS). A custom
resource creates the role first (AWS's answer when it already exists, ``InvalidInput``, is
ignored) and the cluster depends on it. Deleting the stack leaves the role: it is the account's,
other ECS clusters may use it.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct

ECS_SERVICE_ROLE = "AWSServiceRoleForECS"
ECS_SERVICE = "ecs.amazonaws.com"
#: The id CDK gives the singleton function behind every AwsCustomResource of a stack.
PROVIDER_ID = "AWS679f53fac002430cb0da5b7982bd2287"


class EcsServiceLinkedRole(Construct):
    """Ensures ``AWSServiceRoleForECS`` exists; make the first cluster depend on ``self.resource``."""

    def __init__(self, scope: Construct, construct_id: str, *, log_retention: logs.RetentionDays) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        role_arn = stack.format_arn(
            service="iam",
            region="",
            resource="role",
            resource_name=f"aws-service-role/{ECS_SERVICE}/{ECS_SERVICE_ROLE}",
        )
        self.resource = cr.AwsCustomResource(
            self,
            "Create",
            on_create=cr.AwsSdkCall(
                service="IAM",
                action="createServiceLinkedRole",
                parameters={"AWSServiceName": ECS_SERVICE},
                physical_resource_id=cr.PhysicalResourceId.of(ECS_SERVICE_ROLE),
                # "Service role name AWSServiceRoleForECS has been taken in this account".
                ignore_error_codes_matching="InvalidInput",
            ),
            policy=cr.AwsCustomResourcePolicy.from_statements(
                [
                    iam.PolicyStatement(
                        actions=["iam:CreateServiceLinkedRole"],
                        resources=[role_arn],
                        conditions={"StringLike": {"iam:AWSServiceName": ECS_SERVICE}},
                    )
                ]
            ),
            install_latest_aws_sdk=False,
            # A log group of its own, named by CloudFormation: the provider's default one has a
            # fixed name and is retained, so it would block the deploy after a rollback or destroy.
            log_group=logs.LogGroup(self, "ProviderLogs", retention=log_retention),
        )
        # CDK's one provider function of every AwsCustomResource in the stack, and its role.
        provider = stack.node.find_child(PROVIDER_ID)
        cdk.Validations.of(provider.node.find_child("ServiceRole")).acknowledge(
            cdk.Acknowledgment(
                id="AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
                reason="CDK's custom-resource provider writes its logs with AWS's basic execution policy; "
                "its one other permission is iam:CreateServiceLinkedRole for ECS's role",
            )
        )
        cdk.Validations.of(provider.node.find_child("Resource")).acknowledge(
            cdk.Acknowledgment(
                id="AwsSolutions-L1",
                reason="CDK's custom-resource provider: CDK chooses its Node.js runtime with each release "
                "and runs it only during deploys",
            )
        )
