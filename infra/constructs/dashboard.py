"""One CloudWatch dashboard ("is it healthy, and what is it doing?") and the alarms behind it.

Drawn from the metric catalogue (squadron.domain.metrics): every custom metric shown or
alarmed on is looked up there, by name, with the service that publishes it; a test checks
that every catalogued metric is on the dashboard. The queue's own alarms (dead letters,
oldest message) live with the queue (EventQueue) and are shown here too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from squadron.domain.metrics import CATALOGUE

FIVE_MINUTES = cdk.Duration.minutes(5)


@dataclass(frozen=True)
class Watched:
    """What the dashboard and alarms look at."""

    namespace: str
    api: apigwv2.HttpApi
    ingress: lambda_.IFunction
    router: lambda_.IFunction
    reconciler: lambda_.IFunction
    gateway: lambda_.IFunction
    queue: sqs.IQueue
    dead_letter_queue: sqs.IQueue
    table: dynamodb.ITable
    #: Alarms built elsewhere (the queue's) that belong on the dashboard's status row.
    alarms: Sequence[cloudwatch.IAlarm] = ()


class OperationsDashboard(Construct):
    #: Alarm when the router fails this share (percent) of its deliveries over five minutes.
    ROUTER_ERROR_PERCENT = 10
    #: The reconciler runs every five minutes: no finished run in this long means it is not running.
    RECONCILER_SILENCE = cdk.Duration.minutes(20)

    def __init__(self, scope: Construct, construct_id: str, *, watched: Watched, stage: str) -> None:
        super().__init__(scope, construct_id)
        self.watched = watched
        #: (metric name, service) of every custom metric used, for the catalogue test.
        self.custom_metrics: set[tuple[str, str]] = set()
        self.searched: set[tuple[str, str]] = set()
        self.router_error_alarm = self._router_error_alarm()
        self.ingress_5xx_alarm = self._ingress_5xx_alarm()
        self.heartbeat_alarm = self._heartbeat_alarm()
        self.reconciler_alarm = self._reconciler_alarm()
        self.escalation_alarm = self._escalation_alarm()
        self.launch_alarm = self._launch_alarm()
        self.effects_failed_alarm = self._effects_failed_alarm()
        self.dashboard = cloudwatch.Dashboard(
            self,
            "Dashboard",
            # Dashboards are the account's, not the region's: the same stage in two regions
            # would otherwise fight over one name.
            dashboard_name=f"squadron-{stage}-{cdk.Aws.REGION}",
            default_interval=cdk.Duration.hours(6),
        )
        self._widgets()

    @property
    def alarms(self) -> tuple[cloudwatch.Alarm, ...]:
        return (
            self.router_error_alarm,
            self.ingress_5xx_alarm,
            self.heartbeat_alarm,
            self.reconciler_alarm,
            self.escalation_alarm,
            self.launch_alarm,
            self.effects_failed_alarm,
        )

    # --- metrics ---------------------------------------------------------------------------

    def custom(
        self, name: str, statistic: str = "Sum", *, service: str | None = None, label: str | None = None
    ) -> cloudwatch.Metric:
        """A catalogued metric's total (dimension ``service`` only)."""
        spec = CATALOGUE[name]
        publisher = service or spec.service
        self.custom_metrics.add((name, publisher))
        return cloudwatch.Metric(
            namespace=self.watched.namespace,
            metric_name=name,
            dimensions_map={"service": publisher},
            statistic=statistic,
            period=FIVE_MINUTES,
            label=label or name,
        )

    def breakdown(self, name: str, statistic: str = "Sum") -> cloudwatch.MathExpression:
        """A catalogued metric broken down by its dimension: one line per value seen."""
        spec = CATALOGUE[name]
        if spec.dimension is None:
            raise ValueError(f"{name} has no breakdown")
        self.searched.add((name, spec.service))
        query = (
            f"{{{self.watched.namespace},service,{spec.dimension}}} "
            f'MetricName="{name}" service="{spec.service}"'
        )
        return cloudwatch.MathExpression(
            expression=f"SEARCH('{query}', '{statistic}', 300)", label="", period=FIVE_MINUTES
        )

    def per_service(self, name: str, statistic: str = "Sum") -> cloudwatch.MathExpression:
        """A GitHub metric, one line per component that calls GitHub."""
        self.searched.add((name, "*"))
        query = f'{{{self.watched.namespace},service}} MetricName="{name}"'
        return cloudwatch.MathExpression(
            expression=f"SEARCH('{query}', '{statistic}', 300)", label="", period=FIVE_MINUTES
        )

    # --- alarms ----------------------------------------------------------------------------

    def _router_error_alarm(self) -> cloudwatch.Alarm:
        crashed = self.watched.router.metric_errors(period=FIVE_MINUTES, statistic="Sum")
        rate = cloudwatch.MathExpression(
            expression="100 * (FILL(failed, 0) + FILL(crashed, 0)) / "
            "MAX([FILL(routed, 0) + FILL(duplicate, 0) + FILL(failed, 0) + FILL(crashed, 0), 1])",
            using_metrics={
                "failed": self.custom("DeliveriesFailed"),
                "routed": self.custom("DeliveriesRouted"),
                "duplicate": self.custom("DeliveriesDuplicate"),
                "crashed": crashed,
            },
            label="router failures (%)",
            period=FIVE_MINUTES,
        )
        return rate.create_alarm(
            self,
            "RouterErrorRateAlarm",
            alarm_description=(
                f"Squadron: over {self.ROUTER_ERROR_PERCENT}% of deliveries failed in the router (or its "
                "invocations crashed) for 10 minutes. Failed deliveries go back to events.fifo and, after "
                "repeated failures, to the DLQ: read the router's log group for the exception."
            ),
            threshold=self.ROUTER_ERROR_PERCENT,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=2,
            datapoints_to_alarm=2,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )

    def _ingress_5xx_alarm(self) -> cloudwatch.Alarm:
        errors = self.watched.api.metric_server_error(period=FIVE_MINUTES, statistic="Sum")
        return errors.create_alarm(
            self,
            "Ingress5xxAlarm",
            alarm_description=(
                "Squadron: the webhook endpoint answered GitHub with a 5xx (secret or queue unavailable, "
                "or the ingress crashed). GitHub does not retry by itself; the reconciler asks it to "
                "redeliver failed deliveries, and `squadron replay` does so by hand."
            ),
            threshold=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )

    def _heartbeat_alarm(self) -> cloudwatch.Alarm:
        return self.custom("SilentAgents", "Maximum").create_alarm(
            self,
            "NoHeartbeatAlarm",
            alarm_description=(
                "Squadron: an agent's task has stopped heartbeating (or is gone) on two reconciler runs "
                "in a row: its relaunch did not help. `squadron status` lists it; after a second death "
                "in a row it is escalated to humans."
            ),
            threshold=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=2,
            datapoints_to_alarm=2,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )

    def _reconciler_alarm(self) -> cloudwatch.Alarm:
        runs = cloudwatch.Metric(
            namespace=self.watched.namespace,
            metric_name="ReconcilerRuns",
            dimensions_map={"service": "reconciler"},
            statistic="Sum",
            period=self.RECONCILER_SILENCE,
        )
        self.custom_metrics.add(("ReconcilerRuns", "reconciler"))
        return runs.create_alarm(
            self,
            "ReconcilerNotRunningAlarm",
            alarm_description=(
                f"Squadron: no reconciler run finished in {self.RECONCILER_SILENCE.to_minutes()} minutes "
                "(it runs every five). Missed webhooks, dead agent tasks and overdue sleepers are not being "
                "repaired: read the reconciler's log group."
            ),
            threshold=1,
            comparison_operator=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.BREACHING,
        )

    def _escalation_alarm(self) -> cloudwatch.Alarm:
        escalations = cloudwatch.MathExpression(
            expression="FILL(routed, 0) + FILL(hosted, 0)",
            using_metrics={
                "routed": self.custom("Escalations"),
                "hosted": self.custom("AgentEscalations"),
            },
            label="escalations",
            period=FIVE_MINUTES,
        )
        return escalations.create_alarm(
            self,
            "EscalationAlarm",
            alarm_description=(
                "Squadron: an agent handed its issue to humans (breaker tripped, blocked too long, CI or "
                "review failed past the flow's retries, or its task died twice). The issue carries the "
                "escalation label and a comment saying why."
            ),
            threshold=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )

    def _launch_alarm(self) -> cloudwatch.Alarm:
        return self.custom("AgentLaunchesHeld").create_alarm(
            self,
            "LaunchesHeldAlarm",
            alarm_description=(
                "Squadron: ECS refused to start agent tasks (RunTask failed: most often the account's "
                "Fargate vCPU quota, or no capacity). Their launches are held, not lost, and retried "
                "with back-off (5, 10, 20, 40 minutes, then hourly); `squadron agent show` prints the "
                "error. Raise the quota (Service Quotas, 'Fargate On-Demand vCPU resource count') or "
                "lower max_concurrent_agents."
            ),
            threshold=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )

    def _effects_failed_alarm(self) -> cloudwatch.Alarm:
        return self.custom("EffectsFailed").create_alarm(
            self,
            "EffectsFailedAlarm",
            alarm_description=(
                "Squadron: an effect of a committed decision will never be carried out: GitHub refused "
                "it for good (404/410: the issue or repository is gone or hidden; 422: refused as it "
                "is) or it failed ten times. The rest of its decision went on. `squadron status` and "
                "the repository's dashboard issue list it with its reason."
            ),
            threshold=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )

    # --- the dashboard ---------------------------------------------------------------------

    def _graph(
        self,
        title: str,
        left: Sequence[cloudwatch.IMetric],
        *,
        right: Sequence[cloudwatch.IMetric] = (),
        stacked: bool = False,
        width: int = 8,
    ) -> cloudwatch.GraphWidget:
        return cloudwatch.GraphWidget(
            title=title, left=list(left), right=list(right), stacked=stacked, width=width, height=6
        )

    def _widgets(self) -> None:
        w = self.watched
        queue_age = w.queue.metric_approximate_age_of_oldest_message(period=FIVE_MINUTES, statistic="Maximum")
        dead = w.dead_letter_queue.metric_approximate_number_of_messages_visible(
            period=FIVE_MINUTES, statistic="Maximum"
        )
        self.dashboard.add_widgets(
            cloudwatch.TextWidget(
                markdown=(
                    "# Squadron\nIs it healthy? The alarms below are all OK. What is it doing? Webhooks in, "
                    "deliveries routed, agents by status. `squadron status` lists each agent; "
                    "`squadron dlq list` shows what the router gave up on."
                ),
                width=24,
                height=2,
            ),
            cloudwatch.AlarmStatusWidget(
                title="Alarms", alarms=[*w.alarms, *self.alarms], width=24, height=3
            ),
        )
        self.dashboard.add_widgets(
            self._graph(
                "Webhooks",
                [
                    self.custom("WebhooksReceived"),
                    self.custom("WebhooksEnqueued"),
                    self.custom("WebhooksDropped"),
                    self.custom("WebhooksRejected"),
                    self.custom("WebhooksFailed"),
                    self.custom("WebhooksPinged"),
                ],
            ),
            self._graph(
                "Webhooks not enqueued, by reason",
                [
                    self.breakdown("WebhooksRejected"),
                    self.breakdown("WebhooksDropped"),
                    self.breakdown("WebhooksFailed"),
                ],
                stacked=True,
            ),
            self._graph(
                "Webhook endpoint",
                [
                    w.api.metric_client_error(period=FIVE_MINUTES, statistic="Sum", label="4xx"),
                    w.api.metric_server_error(period=FIVE_MINUTES, statistic="Sum", label="5xx"),
                ],
                right=[w.api.metric_latency(period=FIVE_MINUTES, statistic="p99", label="latency p99 (ms)")],
            ),
        )
        self.dashboard.add_widgets(
            self._graph(
                "events.fifo",
                [queue_age.with_(label="oldest event (s)")],
                right=[
                    w.queue.metric_approximate_number_of_messages_visible(
                        period=FIVE_MINUTES, statistic="Maximum", label="waiting"
                    ),
                    dead.with_(label="dead letters"),
                ],
            ),
            self._graph(
                "Router",
                [
                    self.custom("DeliveriesRouted"),
                    self.custom("DeliveriesDuplicate"),
                    self.custom("DeliveriesDiscarded"),
                    self.custom("DeliveriesPaused"),
                    self.custom("DeliveriesFailed"),
                ],
                right=[
                    w.router.metric_errors(period=FIVE_MINUTES, statistic="Sum", label="invocation errors"),
                    self.breakdown("HumanInputsRefused"),  # by rule: who tried to act without authority
                ],
            ),
            self._graph(
                "Deliveries by event (in: enqueued, out: routed)",
                [self.breakdown("WebhooksEnqueued")],
                right=[self.breakdown("DeliveriesRouted")],
            ),
        )
        self.dashboard.add_widgets(
            self._graph("Agents by status", [self.breakdown("AgentsByStatus", "Maximum")], stacked=True),
            self._graph(
                "Agent lifecycle",
                [
                    self.custom("AgentLaunches"),
                    self.custom("AgentLaunchesHeld"),
                    self.custom("EffectsFailed"),
                    self.custom("AgentWakes"),
                    self.custom("AgentSleeps"),
                    self.custom("AgentCompletions"),
                ],
                right=[self.breakdown("AgentTasks")],
            ),
            self._graph(
                "Humans needed",
                [
                    self.custom("Escalations", label="escalated by the router"),
                    self.custom("AgentEscalations", label="escalated by the agent"),
                    self.custom("SilentAgents", "Maximum", label="silent agents"),
                ],
                right=[self.breakdown("BreakerTrips")],
            ),
        )
        self.dashboard.add_widgets(
            self._graph(
                "GitHub: requests and rate limit",
                [self.per_service("GitHubCalls"), self.per_service("GitHubNotModified")],
                right=[self.per_service("GitHubRateLimitRemaining", "Minimum")],
            ),
            self._graph(
                "GitHub: retries and waits",
                [self.per_service("GitHubRetries"), self.per_service("GitHubRateLimitWaits")],
            ),
            self._graph(
                "Reconciler",
                [
                    self.custom("ReconcilerRuns"),
                    self.custom("ReconcilerProblems"),
                    self.breakdown("ReconcilerRepairs"),
                ],
            ),
        )
        self.dashboard.add_widgets(
            self._graph(
                "Cost drivers: agents",
                [
                    self.custom("AgentActiveSeconds", label="agent task seconds (Fargate)"),
                    self.custom("AgentCost", label="agent cost (USD, priced)"),
                ],
                right=[
                    self.custom("AgentTurns"),
                    self.custom("AgentToolCalls"),
                    self.breakdown("AgentTokens"),
                ],
            ),
            self._graph(
                "Cost drivers: Lambda invocations",
                [
                    fn.metric_invocations(period=FIVE_MINUTES, statistic="Sum", label=label)
                    for label, fn in (
                        ("ingress", w.ingress),
                        ("router", w.router),
                        ("reconciler", w.reconciler),
                        ("agent gateway", w.gateway),
                    )
                ],
                right=[
                    self.custom("TokensVended"),
                    self.breakdown("GatewayCalls"),
                    self.breakdown("GatewayRefusals"),
                ],
            ),
            self._graph(
                "Cost drivers: registry and sessions",
                [
                    w.table.metric_consumed_read_capacity_units(period=FIVE_MINUTES, label="DynamoDB reads"),
                    w.table.metric_consumed_write_capacity_units(
                        period=FIVE_MINUTES, label="DynamoDB writes"
                    ),
                ],
                right=[self.breakdown("RoutingEffects"), self.breakdown("SessionStartSeconds", "Average")],
            ),
        )
