"""events.fifo: every accepted webhook, in order per issue or pull request, with a DLQ."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.constructs.observability import messages_waiting_alarm
from squadron.settings import LAMBDA_RATE_LIMIT_WAIT_SECONDS


class EventQueue(Construct):
    """The FIFO queue between the ingress and the router, its dead-letter queue and alarms.

    The ingress sets MessageDeduplicationId to X-GitHub-Delivery, so content-based
    deduplication is off: two deliveries with equal bodies are still two events, and
    a redelivery of the same delivery is dropped. Deduplication and throughput are
    per message group ("<repo id>#<number>"), which enables high-throughput FIFO.
    """

    #: Records per router invocation. Each may wait out one GitHub rate limit (up to
    #: LAMBDA_RATE_LIMIT_WAIT_SECONDS) and then do its work (ROUTER_WORK_SECONDS): a whole batch
    #: of records that each meet a rate limit still ends inside the router's timeout.
    ROUTER_BATCH_SIZE = 3
    ROUTER_WORK_SECONDS = 10
    ROUTER_TIMEOUT = cdk.Duration.seconds(
        ROUTER_BATCH_SIZE * (LAMBDA_RATE_LIMIT_WAIT_SECONDS + ROUTER_WORK_SECONDS)
    )
    # AWS recommends a visibility timeout of at least 6x the timeout of the Lambda
    # consuming the queue, so retries of a throttled invocation cause no redelivery.
    VISIBILITY_TIMEOUT = cdk.Duration.seconds(6 * ROUTER_TIMEOUT.to_seconds())
    RETENTION = cdk.Duration.days(4)
    DEAD_LETTER_RETENTION = cdk.Duration.days(14)  # the maximum; time to investigate
    ALARM_PERIOD = cdk.Duration.minutes(1)
    OLDEST_MESSAGE_AGE_THRESHOLD_SECONDS = 300

    def __init__(
        self, scope: Construct, construct_id: str, *, name_prefix: str, max_receive_count: int
    ) -> None:
        super().__init__(scope, construct_id)
        self.dead_letter_queue = self._build_dead_letter_queue(name_prefix)
        self.queue = self._build_queue(name_prefix, max_receive_count)
        self.dead_letters_alarm = self._build_dead_letters_alarm()
        self.oldest_event_alarm = self._build_oldest_event_alarm()

    @property
    def alarms(self) -> tuple[cloudwatch.Alarm, ...]:
        return (self.dead_letters_alarm, self.oldest_event_alarm)

    def _build_dead_letter_queue(self, name_prefix: str) -> sqs.Queue:
        return sqs.Queue(
            self,
            "DeadLetterQueue",
            queue_name=f"{name_prefix}-events-dlq.fifo",
            fifo=True,
            content_based_deduplication=False,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=self.DEAD_LETTER_RETENTION,
        )

    def _build_queue(self, name_prefix: str, max_receive_count: int) -> sqs.Queue:
        return sqs.Queue(
            self,
            "Queue",
            queue_name=f"{name_prefix}-events.fifo",
            fifo=True,
            content_based_deduplication=False,
            deduplication_scope=sqs.DeduplicationScope.MESSAGE_GROUP,
            fifo_throughput_limit=sqs.FifoThroughputLimit.PER_MESSAGE_GROUP_ID,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            visibility_timeout=self.VISIBILITY_TIMEOUT,
            retention_period=self.RETENTION,
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.dead_letter_queue, max_receive_count=max_receive_count
            ),
        )

    def _build_dead_letters_alarm(self) -> cloudwatch.Alarm:
        return messages_waiting_alarm(
            self,
            "DeadLettersAlarm",
            self.dead_letter_queue,
            "Squadron: events reached the dead-letter queue after repeated router failures. "
            "Inspect them, fix the cause, then redrive them to events.fifo.",
            period=self.ALARM_PERIOD,
        )

    def _build_oldest_event_alarm(self) -> cloudwatch.Alarm:
        metric = self.queue.metric_approximate_age_of_oldest_message(
            period=self.ALARM_PERIOD, statistic=cloudwatch.Stats.MAXIMUM
        )
        return metric.create_alarm(
            self,
            "OldestEventAlarm",
            alarm_description=(
                f"Squadron: an event has waited over {self.OLDEST_MESSAGE_AGE_THRESHOLD_SECONDS} s "
                "in events.fifo; the router is failing, throttled or not consuming."
            ),
            threshold=self.OLDEST_MESSAGE_AGE_THRESHOLD_SECONDS,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
