"""The router Lambda end to end under moto: events.fifo batches → partial batch responses.

Records come from a real (moto) FIFO queue, so their attributes are what
Lambda's event source passes; delivery records live in a DynamoDB table
(moto); the registry, launcher and GitHub are the routing fakes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
from moto import mock_aws

from squadron.adapters.delivery_records import DeliveryRecords
from squadron.domain.events import EventEnvelope
from squadron.shell.dispatch import Dispatcher, InvalidRecordError, parse_record
from squadron.shell.wiring import RouterRuntime
from tests.support.emf import published_metrics, totals
from tests.support.lambdas import FakeLambdaContext, load_handler, sqs_lambda_event
from tests.support.world import World

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

handler_module = load_handler("router")
#: The handler's own wiring from the environment (the fixture replaces it with the fakes).
wired_runtime = handler_module.runtime

A38 = "1-38-feat-dev"
A39 = "1-39-feat-dev"


@dataclass
class Stack:
    world: World
    sqs: SQSClient
    queue_url: str
    queue_arn: str

    def send(self, *envelopes: EventEnvelope, raw: tuple[tuple[str, str], ...] = ()) -> None:
        for envelope in envelopes:
            self.sqs.send_message(
                QueueUrl=self.queue_url,
                MessageBody=envelope.to_message(),
                MessageGroupId=envelope.message_group_id,
                MessageDeduplicationId=envelope.delivery_id,
            )
        for group, body in raw:
            self.sqs.send_message(
                QueueUrl=self.queue_url,
                MessageBody=body,
                MessageGroupId=group,
                MessageDeduplicationId=body[:64],
            )

    def invoke(self) -> tuple[dict[str, Any], list[str]]:
        """Receive one batch, invoke the handler, delete what succeeded; (response, message ids)."""
        messages = self.sqs.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=10,
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
            VisibilityTimeout=0,
        ).get("Messages", [])
        event = sqs_lambda_event(messages, self.queue_arn)
        response: dict[str, Any] = handler_module.handler(event, FakeLambdaContext())
        failed = {item["itemIdentifier"] for item in response["batchItemFailures"]}
        for message in messages:
            if message["MessageId"] not in failed:
                self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"])
        return response, [m["MessageId"] for m in messages]


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:
    with mock_aws():
        dynamodb = boto3.client("dynamodb")
        dynamodb.create_table(
            TableName="registry",
            KeySchema=[
                {"AttributeName": "PK", "KeyType": "HASH"},
                {"AttributeName": "SK", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "PK", "AttributeType": "S"},
                {"AttributeName": "SK", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        sqs = boto3.client("sqs")
        url = sqs.create_queue(
            QueueName="events.fifo", Attributes={"FifoQueue": "true", "VisibilityTimeout": "0"}
        )["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        world = World()
        records = DeliveryRecords("registry", client=dynamodb)
        runtime = RouterRuntime(Dispatcher(world.router, once=records.once), records)
        monkeypatch.setattr(handler_module, "runtime", lambda: runtime)
        yield Stack(world, sqs, url, arn)


def test_a_batch_routes_every_group(stack: Stack) -> None:
    e = stack.world.events
    stack.send(e.assigned(38), e.comment(38), e.assigned(39))
    response, ids = stack.invoke()
    assert response == {"batchItemFailures": []}
    assert len(ids) == 3
    assert {a.agent_id for a in stack.world.registry.agents.values()} == {A38, A39}
    assert [item.kind for item in stack.world.registry.inbox[A38].values()] == ["comment"]


def test_a_failure_returns_its_record_and_the_rest_of_its_group_only(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    e = stack.world.events
    first, second, other = e.assigned(38), e.comment(38), e.assigned(39)
    stack.send(first, second, other)
    stack.world.launcher.fail_next = 1  # the first launch (issue 38) fails
    capsys.readouterr()
    response, ids = stack.invoke()
    assert [item["itemIdentifier"] for item in response["batchItemFailures"]] == ids[:2]
    published = published_metrics(capsys.readouterr().out)
    # The failed record counts once; its group's rest was not tried; the other group was routed.
    assert totals(published)["DeliveriesFailed"] == 1
    assert totals(published)["DeliveriesRouted"] == totals(published)["AgentLaunches"] == 1
    assert published[("DeliveriesRouted", ("Event", "service"), "issues.assigned")] == 1
    assert stack.world.agent(A39).task_arn is not None  # the other group went on
    assert A38 not in stack.world.registry.inbox  # the comment waited behind its group

    # A visibility timeout (9 minutes) later: the failed launch's arming has lapsed by then, its
    # executor is gone (squadron.shell.launching).
    stack.world.now += timedelta(minutes=9)
    response, _ = stack.invoke()  # the queue hands the group back, in order
    assert response == {"batchItemFailures": []}
    assert stack.world.agent(A38).task_arn is not None
    assert [item.kind for item in stack.world.registry.inbox[A38].values()] == ["comment"]
    assert sorted(agent for agent, _, _ in stack.world.launcher.launched.values()) == [A38, A39]


def test_a_delivery_completes_once_even_when_replayed_much_later(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    e = stack.world.events
    assigned = e.assigned(38)
    review = e.review(101, "feat/issue-38", "changes_requested")  # happened after the assignment...
    stack.send(review)  # ...but its group (the PR) was routed first: no agent yet, discarded
    stack.invoke()
    stack.send(assigned)
    stack.invoke()
    before = stack.world.registry.snapshot_state()

    stack.sqs.send_message(  # GitHub redelivers the review (same delivery id) a day later
        QueueUrl=stack.queue_url,
        MessageBody=review.to_message(),
        MessageGroupId=review.message_group_id,
        MessageDeduplicationId=review.delivery_id + "-redelivered",
    )
    capsys.readouterr()
    response, _ = stack.invoke()

    assert response == {"batchItemFailures": []}
    # The routing core alone would now put the review in the agent's inbox; the delivery
    # record says it was processed already, so nothing changes.
    assert stack.world.registry.snapshot_state() == before
    assert totals(published_metrics(capsys.readouterr().out)) == {"DeliveriesDuplicate": 1}


def test_an_invalid_record_fails_alone(stack: Stack) -> None:
    e = stack.world.events
    stack.send(e.assigned(39), raw=(("1#38", '{"schema_version": 1, "event": "issues"}'),))
    response, ids = stack.invoke()
    assert [item["itemIdentifier"] for item in response["batchItemFailures"]] == ids[1:]
    assert stack.world.registry.get_agent(A39) is not None


@pytest.mark.parametrize(
    "body",
    [
        "[" * 100_000 + "]" * 100_000,
        '{"schema_version": 1, "repository": {"id": ' + "9" * 5000 + "}}",
        '{"delivery_id": "\\ud800"}',
        "\x00" * 1000,
        '{"schema_version": 2}',
    ],
    ids=["deep", "huge-number", "lone-surrogate", "nul", "future-version"],
)
def test_a_hostile_record_fails_alone_and_the_rest_of_the_batch_routes(stack: Stack, body: str) -> None:
    e = stack.world.events
    stack.send(e.assigned(39), raw=(("1#38", body),))
    response, ids = stack.invoke()
    assert [item["itemIdentifier"] for item in response["batchItemFailures"]] == ids[1:]
    assert stack.world.registry.get_agent(A39) is not None


def test_a_batch_where_everything_fails_is_retried_whole(stack: Stack) -> None:
    stack.send(raw=(("1#38", "not json"),))
    with pytest.raises(BatchProcessingError):
        stack.invoke()


def test_without_its_app_every_record_goes_back_to_the_queue(
    request: pytest.FixtureRequest,
    stack: Stack,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A stack deployed before its App existed routes nothing and drops nothing."""
    monkeypatch.setenv("GITHUB_APP_ID", "0")
    monkeypatch.setattr(handler_module, "runtime", wired_runtime)
    # One wired router per process: another test of this worker may have wired it with an App.
    wired_runtime.cache_clear()
    request.addfinalizer(wired_runtime.cache_clear)
    e = stack.world.events
    stack.send(e.assigned(38), e.assigned(39))
    response, ids = stack.invoke()
    assert len(ids) == 2
    assert [item["itemIdentifier"] for item in response["batchItemFailures"]] == ids
    assert stack.world.registry.get_agent(A38) is None
    left = stack.sqs.receive_message(QueueUrl=stack.queue_url, MaxNumberOfMessages=10).get("Messages", [])
    assert sorted(m["MessageId"] for m in left) == sorted(ids)
    assert totals(published_metrics(capsys.readouterr().out))["DeliveriesFailed"] == 2
    (held,) = caplog.messages
    assert held.startswith(
        "routing held: router: the stack does not know its GitHub App yet (GITHUB_APP_ID=0)"
    )


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("not json", "body: Invalid JSON"),
        ('{"schema_version": 1, "event": "issues"}', "delivery_id: Field required (and 3 more)"),
        ('{"schema_version": 2}', "schema_version: Input should be 1"),
        ("[]", "body: Input should be an object"),
    ],
    ids=["not json", "fields missing", "unknown schema version", "not an object"],
)
def test_invalid_records_name_their_problem(body: str, problem: str) -> None:
    with pytest.raises(InvalidRecordError) as caught:
        parse_record(body, "m-1")
    assert str(caught.value).startswith("record m-1 is not a valid envelope: ")
    assert problem in str(caught.value)


def test_the_reconciler_can_tell_which_deliveries_completed(stack: Stack) -> None:
    e = stack.world.events
    done, failing = e.assigned(38), e.assigned(39)
    stack.send(done)
    stack.invoke()
    records = DeliveryRecords("registry", client=boto3.client("dynamodb"))
    assert records.completed(done.delivery_id) is True
    assert records.completed("never-seen") is False
    stack.world.launcher.fail_next = 1
    stack.send(failing, e.assigned(40))
    response, ids = stack.invoke()
    assert [f["itemIdentifier"] for f in response["batchItemFailures"]] == ids[:1]  # removed for the retry
    assert records.completed(failing.delivery_id) is False
