"""The queues: events.fifo (the :class:`~squadron.ports.EventQueue` port) and the dashboards
queue (the :class:`~squadron.ports.RefreshQueue` port)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from squadron.adapters.errors import QueueUnavailableError

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

    from squadron.domain.dashboard_refresh import RefreshRequest
    from squadron.domain.events import EventEnvelope


class _Queue:
    """One SQS queue, by URL (its client made on first use)."""

    def __init__(self, queue_url: str, *, client: SQSClient | None = None) -> None:
        self.queue_url = queue_url
        self._client = client

    @property
    def client(self) -> SQSClient:
        if self._client is None:
            self._client = boto3.client("sqs")
        return self._client


class SqsEventQueue(_Queue):
    """Sends envelopes to a FIFO queue: one message group per issue, dedup by delivery id."""

    def send(self, envelope: EventEnvelope) -> str:
        attributes: dict[str, Any] = {
            "event": {"DataType": "String", "StringValue": envelope.event},
            "schema_version": {"DataType": "Number", "StringValue": str(envelope.schema_version)},
        }
        if envelope.action:
            attributes["action"] = {"DataType": "String", "StringValue": envelope.action}
        return self._send(
            envelope.to_message(),
            group=envelope.message_group_id,
            deduplication=envelope.delivery_id,
            MessageAttributes=attributes,
        )

    def send_record(self, body: str, *, group: str, deduplication: str) -> str:
        """Enqueue a record that is no event envelope (its ``kind`` says what it is: the router's
        dispatcher hands it to that kind's handler) in message group ``group``."""
        return self._send(body, group=group, deduplication=deduplication)

    def _send(self, body: str, *, group: str, deduplication: str, **more: Any) -> str:
        try:
            response = self.client.send_message(
                QueueUrl=self.queue_url,
                MessageBody=body,
                MessageGroupId=group,
                MessageDeduplicationId=deduplication,
                **more,
            )
        except ClientError as exc:
            error = exc.response.get("Error", {})
            raise QueueUnavailableError(
                f"SendMessage to {self.queue_url} failed: {error.get('Message', exc)}", code=error.get("Code")
            ) from exc
        except BotoCoreError as exc:
            raise QueueUnavailableError(f"SendMessage to {self.queue_url} failed: {exc}") from exc
        return response["MessageId"]


#: SendMessageBatch takes at most ten messages.
SEND_BATCH = 10


class SqsRefreshQueue(_Queue):
    """The dashboards queue (a standard queue: refresh requests need no order, and a delay is
    per message): the :class:`~squadron.ports.RefreshQueue` port."""

    def _failed(self, operation: str, exc: Exception) -> QueueUnavailableError:
        if isinstance(exc, ClientError):
            error = exc.response.get("Error", {})
            return QueueUnavailableError(
                f"{operation} to {self.queue_url} failed: {error.get('Message', exc)}", code=error.get("Code")
            )
        return QueueUnavailableError(f"{operation} to {self.queue_url} failed: {exc}")

    def request(self, request: RefreshRequest, *, delay_seconds: int = 0) -> None:
        try:
            self.client.send_message(
                QueueUrl=self.queue_url, MessageBody=request.message(), DelaySeconds=delay_seconds
            )
        except (ClientError, BotoCoreError) as exc:
            raise self._failed("SendMessage", exc) from exc

    def request_all(self, requests: Sequence[RefreshRequest]) -> None:
        for start in range(0, len(requests), SEND_BATCH):
            batch = requests[start : start + SEND_BATCH]
            try:
                answer = self.client.send_message_batch(
                    QueueUrl=self.queue_url,
                    Entries=[{"Id": str(i), "MessageBody": r.message()} for i, r in enumerate(batch)],
                )
            except (ClientError, BotoCoreError) as exc:
                raise self._failed("SendMessageBatch", exc) from exc
            if answer.get("Failed"):
                refused = ", ".join(
                    f"{f.get('Id')}: {f.get('Message') or f.get('Code')}" for f in answer["Failed"]
                )
                raise QueueUnavailableError(f"SendMessageBatch to {self.queue_url} refused {refused}")
