"""events.fifo: SQS FIFO adapter for the :class:`~squadron.ports.EventQueue` port."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from squadron.adapters.errors import QueueUnavailableError

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

    from squadron.domain.events import EventEnvelope


class SqsEventQueue:
    """Sends envelopes to a FIFO queue: one message group per issue, dedup by delivery id."""

    def __init__(self, queue_url: str, *, client: SQSClient | None = None) -> None:
        self.queue_url = queue_url
        self._client = client

    @property
    def client(self) -> SQSClient:
        if self._client is None:
            self._client = boto3.client("sqs")
        return self._client

    def send(self, envelope: EventEnvelope) -> str:
        attributes: dict[str, Any] = {
            "event": {"DataType": "String", "StringValue": envelope.event},
            "schema_version": {"DataType": "Number", "StringValue": str(envelope.schema_version)},
        }
        if envelope.action:
            attributes["action"] = {"DataType": "String", "StringValue": envelope.action}
        try:
            response = self.client.send_message(
                QueueUrl=self.queue_url,
                MessageBody=envelope.to_message(),
                MessageGroupId=envelope.message_group_id,
                MessageDeduplicationId=envelope.delivery_id,
                MessageAttributes=attributes,
            )
        except ClientError as exc:
            error = exc.response.get("Error", {})
            raise QueueUnavailableError(
                f"SendMessage to {self.queue_url} failed: {error.get('Message', exc)}", code=error.get("Code")
            ) from exc
        except BotoCoreError as exc:
            raise QueueUnavailableError(f"SendMessage to {self.queue_url} failed: {exc}") from exc
        return response["MessageId"]
