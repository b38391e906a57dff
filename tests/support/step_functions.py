"""Step Functions on moto for the pipeline tests: executions really run (moto's ASL interpreter),
with :mod:`squadron.adapters.moto_step_functions` applied; waits are for conditions, never for
durations."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import boto3
from moto import mock_aws

from squadron.adapters import moto_step_functions
from squadron.adapters.step_functions import Pipelines

REGION = "us-east-1"
ROLE = "arn:aws:iam::123456789012:role/squadron-dev-pipelines"
PREFIX = "sq"
#: Long enough for a slow shared machine; every wait ends as soon as its condition holds.
DEADLINE = 60.0

T = TypeVar("T")


def wait_for(what: str, probe: Callable[[], T | None], deadline: float = DEADLINE) -> T:
    """``probe()``'s first answer that is not None (or False), polled until ``deadline`` seconds."""
    end = time.monotonic() + deadline
    while True:
        found = probe()
        if found is not None and found is not False:
            return found
        if time.monotonic() > end:
            raise AssertionError(f"waited {deadline:.0f} s for {what}")
        time.sleep(0.02)


@dataclass
class Stack:
    pipelines: Pipelines
    sfn: Any
    sqs: Any
    queue_url: str

    def finished(self, execution_arn: str) -> dict[str, Any]:
        """The execution's description once it is no longer running."""

        def probe() -> dict[str, Any] | None:
            held: dict[str, Any] = self.sfn.describe_execution(executionArn=execution_arn)
            return None if held["status"] == "RUNNING" else held

        return wait_for(f"{execution_arn} to finish", probe)

    def messages(self, count: int) -> list[dict[str, Any]]:
        """The next ``count`` messages of the queue (received and deleted, attributes included)."""
        got: list[dict[str, Any]] = []

        def probe() -> list[dict[str, Any]] | None:
            answer = self.sqs.receive_message(
                QueueUrl=self.queue_url, MaxNumberOfMessages=10, AttributeNames=["All"]
            )
            for message in answer.get("Messages", []):
                got.append(message)
                self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"])
            return got if len(got) >= count else None

        wait_for(f"{count} message(s) on the queue", probe)
        return got

    def bodies(self, count: int) -> list[dict[str, Any]]:
        return [json.loads(m["Body"]) for m in self.messages(count)]


@contextmanager
def step_functions() -> Iterator[Stack]:
    """moto with Step Functions executing, an events.fifo queue and the real adapter; every run
    still going at the end is stopped (moto's interpreter threads wait otherwise)."""
    moto_step_functions.patch()
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        sfn = boto3.client("stepfunctions", region_name=REGION)
        sqs = boto3.client("sqs", region_name=REGION)
        queue_url = sqs.create_queue(QueueName="squadron-dev-events.fifo", Attributes={"FifoQueue": "true"})[
            "QueueUrl"
        ]
        stack = Stack(Pipelines(prefix=PREFIX, role_arn=ROLE, client=sfn), sfn, sqs, queue_url)
        try:
            yield stack
        finally:
            for machine in sfn.list_state_machines()["stateMachines"]:
                for run in sfn.list_executions(
                    stateMachineArn=machine["stateMachineArn"], statusFilter="RUNNING"
                )["executions"]:
                    with contextlib.suppress(Exception):  # moto: a run that ended meanwhile has no worker
                        sfn.stop_execution(executionArn=run["executionArn"])
