"""The registry table and events.fifo under moto, as the agent and reconciler tests use them."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import boto3

from squadron.adapters.dynamo_registry import TABLE_DEFINITION, DynamoRegistry
from squadron.domain.events import EventEnvelope

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


def registry_and_queue() -> tuple[DynamoRegistry, SQSClient, str]:
    """A fresh registry table and events.fifo (call inside ``mock_aws``)."""
    dynamodb = boto3.client("dynamodb")
    dynamodb.create_table(TableName="registry", **TABLE_DEFINITION)
    sqs = boto3.client("sqs")
    url = sqs.create_queue(
        QueueName="events.fifo", Attributes={"FifoQueue": "true", "VisibilityTimeout": "0"}
    )["QueueUrl"]
    return DynamoRegistry("registry", client=dynamodb), sqs, url


def drain(sqs: SQSClient, queue_url: str, route: Callable[[EventEnvelope], Any]) -> list[EventEnvelope]:
    """Route what is on events.fifo (as the router Lambda would) and delete it; the envelopes."""
    messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", [])
    envelopes = [EventEnvelope.from_message(m["Body"]) for m in messages]
    for envelope, message in zip(envelopes, messages, strict=True):
        route(envelope)
        sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
    return envelopes
