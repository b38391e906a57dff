"""Per-delivery processing records: Powertools idempotency on the registry table.

A delivery (GitHub's ``X-GitHub-Delivery``, or a framework command's id) is
processed at most once to completion: the first attempt writes an INPROGRESS
record, success turns it COMPLETED (later copies are skipped and answered from
the record), and a failure deletes it so the queue's retry processes the
delivery again from the start. Records outlive GitHub's three-day redelivery
window, so a redelivery of an old event is recognised too.

The records live in the registry table under one partition
(``PK = DELIVERY#<function>``, ``SK`` = hash of the delivery id), expiring through
the table's TTL attribute; their status attribute is ``delivery_status`` so that
they never show up in the registry's agent-status index.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyItemNotFoundError

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext
    from mypy_boto3_dynamodb import DynamoDBClient

#: GitHub lets an App redeliver a delivery for three days; keep records a day longer.
DELIVERY_RECORD_TTL = timedelta(days=4)
TTL_ATTRIBUTE = "expires_at"

F = TypeVar("F", bound=Callable[..., Any])


class DeliveryRecords:
    """Wraps a function taking ``envelope=`` so each delivery id completes at most once."""

    def __init__(
        self,
        table_name: str,
        *,
        partition: str = "DELIVERY#router",
        ttl: timedelta = DELIVERY_RECORD_TTL,
        client: DynamoDBClient | None = None,
    ) -> None:
        self.partition = partition
        self._client = client
        self.config = IdempotencyConfig(
            event_key_jmespath="delivery_id",
            raise_on_no_idempotency_key=True,
            expires_after_seconds=int(ttl.total_seconds()),
        )
        self.store = DynamoDBPersistenceLayer(
            table_name=table_name,
            key_attr="PK",
            sort_key_attr="SK",
            static_pk_value=partition,
            expiry_attr=TTL_ATTRIBUTE,
            status_attr="delivery_status",
            boto3_client=client,
        )

    def register_lambda_context(self, context: LambdaContext) -> None:
        """Lets an attempt cut short by the Lambda timeout be retried once the timeout passed."""
        self.config.register_lambda_context(context)

    def once(self, function: F) -> F:
        wrapped: F = idempotent_function(
            function,
            data_keyword_argument="envelope",
            persistence_store=self.store,
            config=self.config,
            # A fixed prefix (not the Lambda's name): the reconciler looks records up by it.
            key_prefix=self.partition,
        )
        return wrapped

    def completed(self, delivery_id: str) -> bool:
        """Whether ``delivery_id`` was processed to completion (the reconciler's check)."""
        lookup = DynamoDBPersistenceLayer(
            table_name=self.store.table_name,
            key_attr="PK",
            sort_key_attr="SK",
            static_pk_value=self.partition,
            expiry_attr=TTL_ATTRIBUTE,
            status_attr="delivery_status",
            boto3_client=self._client,
        )
        lookup.configure(self.config, key_prefix=self.partition)
        try:
            record = lookup.get_record({"delivery_id": delivery_id})
        except IdempotencyItemNotFoundError:
            return False
        return record is not None and record.status == "COMPLETED"
