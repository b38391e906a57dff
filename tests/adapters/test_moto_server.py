"""The local stack's moto server takes DynamoDB's requests one at a time.

moto's TransactWriteItems copies the whole table and, when a condition fails, puts the copy
back: a write another request made meanwhile is undone (a lease release was lost this way under
load). The server the local stack starts serializes DynamoDB's requests; here a transaction
looks, from inside moto, for another thread that could get in: none can."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, cast

import boto3
import httpx
import pytest
from moto import mock_aws
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.dynamodb.models import DynamoDBBackend, dynamodb_backends
from moto.dynamodb.responses import DynamoHandler
from moto.dynamodbstreams.responses import DynamoDBStreamsHandler

from squadron.adapters import moto_server
from squadron.adapters.local_aws import MotoProcess
from tests.support.step_functions import wait_for


def _others_can_enter() -> bool:
    """Whether another thread could take a DynamoDB request now."""
    got: list[bool] = []

    def attempt() -> None:
        entered = moto_server.ONE_AT_A_TIME.acquire(blocking=False)
        if entered:
            moto_server.ONE_AT_A_TIME.release()
        got.append(entered)

    thread = threading.Thread(target=attempt)
    thread.start()
    thread.join()
    return got[0]


def test_while_a_transaction_runs_no_other_dynamodb_request_can(monkeypatch: pytest.MonkeyPatch) -> None:
    moto_server.patch()
    moto_server.patch()  # idempotent: one lock, not two wrappers
    seen: list[bool] = []
    original = DynamoDBBackend.transact_write_items

    def probed(self: DynamoDBBackend, items: list[dict[str, Any]]) -> None:
        seen.append(_others_can_enter())
        original(self, items)

    monkeypatch.setattr(DynamoDBBackend, "transact_write_items", probed)
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName="t",
            KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        client.put_item(TableName="t", Item={"PK": {"S": "a"}, "version": {"N": "1"}})
        with pytest.raises(client.exceptions.TransactionCanceledException):
            client.transact_write_items(
                TransactItems=[
                    {
                        "Put": {
                            "TableName": "t",
                            "Item": {"PK": {"S": "a"}, "version": {"N": "3"}},
                            "ConditionExpression": "version = :two",
                            "ExpressionAttributeValues": {":two": {"N": "2"}},
                        }
                    }
                ]
            )
    assert seen == [False]  # the failing transaction, and its roll-back, ran alone
    assert _others_can_enter()  # and the lock was given back


def test_a_stream_read_takes_its_turn_with_the_writes() -> None:
    """A stream read in the middle of a failing transaction would see records its roll-back
    removes, and its iterator would then skip the records that take their places (events never
    published): DynamoDB Streams' requests take the same lock. (moto's in-process mock does not
    serve DynamoDB Streams, so this checks the wiring; the local stack's server serves them.)"""
    moto_server.patch()
    assert set(moto_server.SERIALIZED) == {DynamoHandler, DynamoDBStreamsHandler}
    for handler in moto_server.SERIALIZED:
        assert getattr(handler.call_action, "_serialized", False), handler


def test_a_failed_transaction_leaves_the_stream_its_readers_hold() -> None:
    """moto rolls a failed transaction back by replacing the table with a copy: the stream shard
    every iterator handed out before holds must stay the live one, or the publisher reads a
    stream that never grows again."""
    moto_server.patch()
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName="t",
            KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"},
        )
        backend = dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"]
        held = backend.tables["t"].stream_shard  # what a reader's iterator holds
        assert held is not None
        client.put_item(TableName="t", Item={"PK": {"S": "a"}, "version": {"N": "1"}})
        with pytest.raises(client.exceptions.TransactionCanceledException):
            client.transact_write_items(
                TransactItems=[
                    {"Put": {"TableName": "t", "Item": {"PK": {"S": "b"}}}},
                    {
                        "Put": {
                            "TableName": "t",
                            "Item": {"PK": {"S": "a"}, "version": {"N": "3"}},
                            "ConditionExpression": "version = :two",
                            "ExpressionAttributeValues": {":two": {"N": "2"}},
                        }
                    },
                ]
            )
        client.put_item(TableName="t", Item={"PK": {"S": "c"}})
        assert backend.tables["t"].stream_shard is held
        written = [record.record["dynamodb"]["Keys"]["PK"]["S"] for record in held.items]
        assert written == ["a", "c"]  # the rolled-back put of "b" is gone, the next write is seen


#: (case, the failing transaction's items before its failing condition): each is undone.
UNDONE: list[tuple[str, list[dict[str, Any]]]] = [
    ("a new item", [{"Put": {"TableName": "t", "Item": {"PK": {"S": "new"}, "SK": {"S": "x"}}}}]),
    (
        "an item replaced",
        [{"Put": {"TableName": "t", "Item": {"PK": {"S": "a"}, "SK": {"S": "1"}, "v": {"N": "9"}}}}],
    ),
    (
        "an item updated in place",
        [
            {
                "Update": {
                    "TableName": "t",
                    "Key": {"PK": {"S": "a"}, "SK": {"S": "2"}},
                    "UpdateExpression": "SET v = :nine ADD n :one",
                    "ExpressionAttributeValues": {":nine": {"N": "9"}, ":one": {"N": "1"}},
                }
            }
        ],
    ),
    ("an item deleted", [{"Delete": {"TableName": "t", "Key": {"PK": {"S": "a"}, "SK": {"S": "1"}}}}]),
    (
        "one of each",
        [
            {"Put": {"TableName": "t", "Item": {"PK": {"S": "b"}, "SK": {"S": "1"}}}},
            {"Delete": {"TableName": "t", "Key": {"PK": {"S": "a"}, "SK": {"S": "1"}}}},
            {
                "Update": {
                    "TableName": "t",
                    "Key": {"PK": {"S": "a"}, "SK": {"S": "2"}},
                    "UpdateExpression": "SET v = :nine",
                    "ExpressionAttributeValues": {":nine": {"N": "9"}},
                }
            },
        ],
    ),
]


@pytest.mark.parametrize("applied", [c[1] for c in UNDONE], ids=[c[0] for c in UNDONE])
def test_a_failed_transaction_is_undone_item_by_item_and_its_records_with_it(
    applied: list[dict[str, Any]],
) -> None:
    """The roll-back restores the items the transaction named (not a copy of the whole table):
    after the failure, the table and its stream are exactly as before it."""
    moto_server.patch()
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName="t",
            KeySchema=[
                {"AttributeName": "PK", "KeyType": "HASH"},
                {"AttributeName": "SK", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "PK", "AttributeType": "S"},
                {"AttributeName": "SK", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )
        for sk, v in (("1", "1"), ("2", "2"), ("3", "3")):
            client.put_item(TableName="t", Item={"PK": {"S": "a"}, "SK": {"S": sk}, "v": {"N": v}})
        backend = dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"]
        table = backend.tables["t"]
        held = table.stream_shard
        assert held is not None
        records = len(held.items)
        before = client.scan(TableName="t")["Items"]
        failing: dict[str, Any] = {
            "ConditionCheck": {
                "TableName": "t",
                "Key": {"PK": {"S": "a"}, "SK": {"S": "3"}},
                "ConditionExpression": "v = :two",
                "ExpressionAttributeValues": {":two": {"N": "2"}},
            }
        }
        with pytest.raises(client.exceptions.TransactionCanceledException):
            client.transact_write_items(TransactItems=cast(Any, [*applied, failing]))
        assert backend.tables["t"] is table and table.stream_shard is held
        assert client.scan(TableName="t")["Items"] == before
        assert len(held.items) == records
        # And a transaction that holds commits as before.
        client.transact_write_items(TransactItems=cast(Any, applied))
        assert client.scan(TableName="t")["Items"] != before
        assert len(held.items) == records + len(applied)


@pytest.mark.parametrize("inherited", [None, "5000"], ids=["unset", "another port"])
def test_the_servers_step_functions_puts_a_task_on_its_own_queue(
    inherited: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """moto's interpreter sends a state's SQS call to ``localhost:$MOTO_PORT``: the local stack's
    server is that port whatever the environment says (docs/local-stack.md)."""
    if inherited is None:
        monkeypatch.delenv("MOTO_PORT", raising=False)
    else:
        monkeypatch.setenv("MOTO_PORT", inherited)
    server = MotoProcess(tmp_path / "moto.log")
    endpoint = server.start()
    try:
        httpx.post(f"{endpoint}/moto-api/config", json={"stepfunctions": {"execute_state_machine": True}})
        sqs = boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1")
        sfn = boto3.client("stepfunctions", endpoint_url=endpoint, region_name="us-east-1")
        queue = sqs.create_queue(QueueName="events.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        task = {
            "Type": "Task",
            "Resource": "arn:aws:states:::sqs:sendMessage.waitForTaskToken",
            "Parameters": {
                "QueueUrl": queue,
                "MessageGroupId": "g",
                "MessageDeduplicationId": "d",
                "MessageBody": {"token.$": "$$.Task.Token"},
            },
            "End": True,
        }
        machine = sfn.create_state_machine(
            name="m",
            definition=json.dumps({"StartAt": "T", "States": {"T": task}}),
            roleArn="arn:aws:iam::123456789012:role/r",
        )["stateMachineArn"]
        run = sfn.start_execution(stateMachineArn=machine)["executionArn"]

        def token() -> str | None:
            got = sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=1).get("Messages", [])
            if not got and sfn.describe_execution(executionArn=run)["status"] != "RUNNING":
                raise AssertionError(sfn.get_execution_history(executionArn=run)["events"][-1])
            return str(json.loads(got[0]["Body"])["token"]) if got else None

        sfn.send_task_success(taskToken=wait_for("the task's message", token), output='{"done": true}')
        finished = wait_for(
            "the run to end",
            lambda: (d := sfn.describe_execution(executionArn=run))["status"] != "RUNNING" and d,
        )
        assert finished["status"] == "SUCCEEDED" and json.loads(finished["output"]) == {"done": True}
    finally:
        server.stop()
