"""Wiring the router to AWS and GitHub from its environment (the imperative edge)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from squadron.adapters.delivery_records import DeliveryRecords
from squadron.shell.dispatch import Dispatcher

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext


@dataclass(frozen=True)
class RouterRuntime:
    dispatcher: Dispatcher
    records: DeliveryRecords | None = None

    def register_lambda_context(self, context: LambdaContext) -> None:
        if self.records is not None:
            self.records.register_lambda_context(context)
