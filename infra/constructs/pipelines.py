"""Pipelines on Step Functions (docs/pipelines.md): the role their state machines run with, and
what the router, the reconciler and the dashboards may do with state machines named ``<prefix>_*``.

The one home of the state machines' ARNs: every grant, and the failed-run rule
(:mod:`infra.constructs.pipeline_runs`), takes them from :class:`PipelineRuntime`. Their names end
the prefix with ``_`` (:data:`squadron.domain.pipeline_wire.PREFIX_END`), which no stage name
contains: ``squadron-prod_*`` is the stage ``prod``'s alone, never the ``squadron-prod-x_*`` of a
stage ``prod-x`` in the same account.

The state machines themselves are not in the stack: the reconciler and the router publish each
repository's from its configuration (squadron.shell.pipeline_runs). Their execution role may put a
stage's task on events.fifo and start, watch and stop child runs (sub-pipelines) of this stage's
state machines, nothing else. The reconciler publishes (create, update, publish a version, tag,
list); the router publishes on first need, starts runs and answers their tasks' tokens; the
dashboards read what runs are doing (list, describe, history).
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.constructs.router import as_nag_renders
from squadron.domain.pipeline_wire import machines_head

#: Publishing a state machine's definition as a version, tagged with its digest.
PUBLISH_ACTIONS = (
    "states:DescribeStateMachine",
    "states:CreateStateMachine",
    "states:UpdateStateMachine",
    "states:PublishStateMachineVersion",
    "states:TagResource",
    "states:ListTagsForResource",
)
_MACHINES_REASON = (
    "The stage's pipelines' state machines ('stateMachine:<prefix>_*', versions included): one per "
    "repository and pipeline, named by the repository's id and the pipeline, unknown in advance."
)
_EXECUTIONS_REASON = (
    "Runs of the stage's pipelines ('execution:<prefix>_*'): named by the delivery that started them, "
    "unknown in advance."
)
_TOKENS_REASON = (
    "SendTaskSuccess/Failure/Heartbeat and ListStateMachines have no resource-level permissions in IAM; "
    "a token answered is checked to come from one of the repository's own state machines first."
)


class PipelineRuntime(Construct):
    """The pipelines' execution role and the grants of the functions that publish and start them."""

    def __init__(self, scope: Construct, construct_id: str, *, queue: sqs.IQueue, prefix: str) -> None:
        super().__init__(scope, construct_id)
        self.prefix = prefix
        stack = cdk.Stack.of(self)
        head = machines_head(prefix)
        #: What every state machine's ARN begins with (``...:stateMachine:<prefix>_``).
        self.machines_arn_head = stack.format_arn(
            service="states",
            resource="stateMachine",
            resource_name=head,
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )
        self.machines = stack.format_arn(
            service="states",
            resource="stateMachine",
            resource_name=f"{head}*",
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )
        self.executions = stack.format_arn(
            service="states",
            resource="execution",
            resource_name=f"{head}*",
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )
        self.role = iam.Role(
            self,
            "ExecutionRole",
            assumed_by=iam.ServicePrincipal(
                "states.amazonaws.com", conditions={"StringEquals": {"aws:SourceAccount": stack.account}}
            ),
            description="Squadron: a pipeline's run puts its stages' tasks on events.fifo, runs its sub-pipelines",
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[queue.queue_arn])
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(actions=["states:StartExecution"], resources=[self.machines])
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["states:DescribeExecution", "states:StopExecution"], resources=[self.executions]
            )
        )
        # startExecution.sync:2 follows the child through this managed rule (Step Functions' own).
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["events:PutTargets", "events:PutRule", "events:DescribeRule"],
                resources=[
                    stack.format_arn(
                        service="events",
                        resource="rule",
                        resource_name="StepFunctionsGetEventsForStepFunctionsExecutionRule",
                    )
                ],
            )
        )
        self._acknowledge(self.role, machines=True, executions=True)

    def _acknowledge(
        self, role: iam.IRole, *, machines: bool = False, executions: bool = False, tokens: bool = False
    ) -> None:
        found = [
            *(
                [cdk.Acknowledgment(id=f"AwsSolutions-IAM5[Resource::{as_nag_renders(self, self.machines)}]",
                                    reason=_MACHINES_REASON)]
                if machines
                else []
            ),
            *(
                [cdk.Acknowledgment(id=f"AwsSolutions-IAM5[Resource::{as_nag_renders(self, self.executions)}]",
                                    reason=_EXECUTIONS_REASON)]
                if executions
                else []
            ),
            *([cdk.Acknowledgment(id="AwsSolutions-IAM5[Resource::*]", reason=_TOKENS_REASON)] if tokens else []),
        ]  # fmt: skip
        cdk.Validations.of(role).acknowledge(*found)

    def _pass_role(self, role: iam.IRole) -> None:
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["iam:PassRole"],
                resources=[self.role.role_arn],
                conditions={"StringEquals": {"iam:PassedToService": "states.amazonaws.com"}},
            )
        )

    def _environment(self, function: lambda_.Function) -> None:
        function.add_environment("PIPELINES_PREFIX", self.prefix)
        function.add_environment("PIPELINES_ROLE_ARN", self.role.role_arn)

    def grant_publishing(self, role: iam.IRole, function: lambda_.Function) -> None:
        """The reconciler: keep the repositories' state machines in step (and list them)."""
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=list(PUBLISH_ACTIONS), resources=[self.machines])
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["states:ListStateMachines"], resources=["*"])
        )
        self._pass_role(role)
        self._environment(function)
        self._acknowledge(role, machines=True, tokens=True)

    def grant_running(self, role: iam.IRole, function: lambda_.Function) -> None:
        """The router: publish on first need, start runs, answer their stages' tokens, and steer
        a running run when an event reaches it (read where it is; stop it and its child runs)."""
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=[*PUBLISH_ACTIONS, "states:StartExecution", "states:ListExecutions"],
                resources=[self.machines],
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["states:DescribeExecution", "states:GetExecutionHistory", "states:StopExecution"],
                resources=[self.executions],
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["states:ListStateMachines"], resources=["*"])
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["states:SendTaskSuccess", "states:SendTaskFailure", "states:SendTaskHeartbeat"],
                resources=["*"],
            )
        )
        self._pass_role(role)
        self._environment(function)
        self._acknowledge(role, machines=True, executions=True, tokens=True)

    def grant_reading(self, role: iam.IRole, function: lambda_.Function) -> None:
        """The dashboards: list the stage's state machines and their runs, and read each running
        run's description and history (its current stages), nothing else."""
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["states:ListExecutions"], resources=[self.machines])
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["states:DescribeExecution", "states:GetExecutionHistory"],
                resources=[self.executions],
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["states:ListStateMachines"], resources=["*"])
        )
        self._environment(function)
        self._acknowledge(role, machines=True, executions=True, tokens=True)
