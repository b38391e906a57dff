"""Where alarms go: one encrypted SNS topic (a dashboard joins it later)."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

#: How long a queue alarm's metric is looked at by default.
ALARM_PERIOD = cdk.Duration.minutes(5)


def messages_waiting_alarm(
    scope: Construct,
    construct_id: str,
    queue: sqs.IQueue,
    description: str,
    *,
    period: cdk.Duration = ALARM_PERIOD,
    statistic: str = cloudwatch.Stats.MAXIMUM,
) -> cloudwatch.Alarm:
    """An alarm as soon as a message waits in ``queue`` (a dead-letter or failure queue: nothing
    should ever be there); no data is no alarm."""
    return cloudwatch.Alarm(
        scope,
        construct_id,
        alarm_description=description,
        metric=queue.metric_approximate_number_of_messages_visible(period=period, statistic=statistic),
        threshold=0,
        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluation_periods=1,
        treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
    )


class Observability(Construct):
    """The alarm topic, with an optional email subscription; `notify_on` wires alarms to it."""

    # A customer-managed key: CloudWatch cannot publish to a topic encrypted with the
    # AWS-managed alias/aws/sns key, whose policy cannot be changed.
    KEY_PENDING_WINDOW = cdk.Duration.days(7)

    def __init__(self, scope: Construct, construct_id: str, *, alarm_email: str | None) -> None:
        super().__init__(scope, construct_id)
        self.alarm_key = self._build_alarm_key()
        self.alarm_topic = self._build_alarm_topic()
        if alarm_email:
            self.alarm_topic.add_subscription(subscriptions.EmailSubscription(alarm_email))

    def notify_on(self, *alarms: cloudwatch.Alarm) -> None:
        """Send each alarm's ALARM and OK transitions to the alarm topic."""
        action = cloudwatch_actions.SnsAction(self.alarm_topic)
        for alarm in alarms:
            alarm.add_alarm_action(action)
            alarm.add_ok_action(action)

    def _build_alarm_key(self) -> kms.Key:
        key = kms.Key(
            self,
            "AlarmTopicKey",
            description="Squadron: encrypts the alarm topic",
            enable_key_rotation=True,
            # The key protects notifications in flight only; nothing stored needs it.
            removal_policy=cdk.RemovalPolicy.DESTROY,
            pending_window=self.KEY_PENDING_WINDOW,
        )
        # The statement AWS documents for alarms publishing to an encrypted topic.
        key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowCloudWatchAlarmsToPublish",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],  # in a key policy, "*" means this key
            )
        )
        return key

    def _build_alarm_topic(self) -> sns.Topic:
        topic = sns.Topic(
            self,
            "AlarmTopic",
            display_name="Squadron alarms",
            master_key=self.alarm_key,
            enforce_ssl=True,
        )
        # enforce_ssl writes an AWS::SNS::TopicPolicy holding only its Deny, and a topic policy
        # replaces the topic's default one: without this Allow no alarm could publish.
        topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowCloudWatchAlarmsToPublish",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[topic.topic_arn],
                conditions={
                    "StringEquals": {"aws:SourceAccount": cdk.Stack.of(self).account},
                    "ArnLike": {
                        "aws:SourceArn": cdk.Stack.of(self).format_arn(
                            service="cloudwatch",
                            resource="alarm",
                            resource_name="*",
                            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
                        )
                    },
                },
            )
        )
        return topic
