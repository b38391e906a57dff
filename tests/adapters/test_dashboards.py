"""The dashboards on AWS's parts (moto): the slots on DynamoDB (against the fake's contract), the
dashboards queue, and the whole path the stack deploys: a decision's events through the
registry's stream, the publisher, the bus and its rule onto the dashboards queue, and the
dashboards Lambda handler rendering each repository at most once a minute."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from types import ModuleType

import boto3
import pytest
from moto import mock_aws
from moto.server import ThreadedMotoServer

from squadron.adapters.dynamo_dashboards import DynamoDashboardSlots
from squadron.adapters.dynamo_registry import EVENT_STREAM, TABLE_DEFINITION, DynamoRegistry
from squadron.adapters.errors import QueueUnavailableError
from squadron.adapters.event_bus import EventBusPublisher, StreamReader, committed_events
from squadron.adapters.local_aws import QueuePoller, provision_dashboards, provision_event_bus
from squadron.adapters.sqs import SqsRefreshQueue
from squadron.domain.dashboard_refresh import RefreshRequest, request_from_message
from squadron.domain.domain_events import Repository
from squadron.ports import DashboardSlots, RenderClaim
from squadron.shell.dashboards import DashboardService
from squadron.shell.router import RouterService
from tests.support.events import Events
from tests.support.fake_dashboards import DashboardGitHub, FakeDashboardSlots
from tests.support.lambdas import FakeLambdaContext, load_handler, sqs_lambda_event
from tests.support.router_stack import router_over

T0 = datetime(2026, 11, 25, 9, 30, tzinfo=UTC)
TABLE = "registry"
REPO = Repository(id=1, full_name="octo/repo")


# --- the slots: the fake and DynamoDB keep the same contract -----------------------------------


@pytest.fixture(params=["fake", "dynamodb"])
def slots(request: pytest.FixtureRequest) -> Iterator[DashboardSlots]:
    if request.param == "fake":
        yield FakeDashboardSlots()
        return
    with mock_aws():
        client = boto3.client("dynamodb")
        client.create_table(TableName=TABLE, **TABLE_DEFINITION)
        yield DynamoDashboardSlots(TABLE, client=client)


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_a_rendering_is_claimed_once_a_minute_and_deferred_once_in_between(slots: DashboardSlots) -> None:
    minute = timedelta(minutes=1)
    assert slots.claim(1, _at(0), _at(0) - minute) == RenderClaim(True, _at(0), None)  # never rendered
    assert slots.claim(1, _at(30), _at(30) - minute) == RenderClaim(False, _at(0))  # the last one's time
    assert slots.claim(2, _at(30), _at(30) - minute).claimed  # another repository's own slot
    assert slots.defer(1, _at(60), _at(30))  # the first request within the minute queues one
    assert not slots.defer(1, _at(60), _at(40))  # the next ones ride on it
    assert not slots.defer(1, _at(60), _at(59.5))
    assert slots.defer(1, _at(60), _at(59.5), again=True)  # the deferred one itself, come early
    assert slots.claim(1, _at(60), _at(60) - minute) == RenderClaim(True, _at(60), _at(0))  # to the ms
    assert slots.defer(1, _at(120), _at(61))  # the claim cleared the mark: the next change defers
    assert slots.defer(1, _at(200), _at(121))  # a mark past due (its request lost) is no cover


def test_a_rendering_that_wrote_nothing_gives_its_minute_back(slots: DashboardSlots) -> None:
    minute = timedelta(minutes=1)
    first = slots.claim(1, _at(0), _at(0) - minute)
    assert first == RenderClaim(True, _at(0), None)
    slots.release(1, _at(0), first.previous)  # nothing to write: as if never rendered
    second = slots.claim(1, _at(10), _at(10) - minute)
    assert second == RenderClaim(True, _at(10), None)  # a change ten seconds later renders at once
    third = slots.claim(1, _at(100), _at(100) - minute)
    assert third == RenderClaim(True, _at(100), _at(10))  # it names the rendering before it
    slots.release(1, _at(100), third.previous)
    assert slots.claim(1, _at(60), _at(60) - minute) == RenderClaim(False, _at(10))  # back as it was
    slots.release(1, _at(90), _at(0))  # not the claim that holds the slot: changes nothing
    assert slots.claim(1, _at(69), _at(69) - minute) == RenderClaim(False, _at(10))


# --- the dashboards queue -----------------------------------------------------------------------


def test_the_queue_delays_a_deferral_and_sends_sweeps_ten_a_call() -> None:
    with mock_aws():
        sqs = boto3.client("sqs")
        url = sqs.create_queue(QueueName="dashboards")["QueueUrl"]
        queue = SqsRefreshQueue(url, client=sqs)
        queue.request(RefreshRequest(repository=REPO, installation=77, deferred=True), delay_seconds=45)
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        assert (
            attributes["ApproximateNumberOfMessagesDelayed"],
            attributes["ApproximateNumberOfMessages"],
        ) == (
            "1",
            "0",
        )
        sweeps = [
            RefreshRequest(repository=Repository(id=n, full_name=f"octo/r{n}"), cause="sweep")
            for n in range(1, 24)
        ]
        queue.request_all(sweeps)
        received: list[RefreshRequest] = []
        while batch := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
            received += [request_from_message(m["Body"]) for m in batch]
        assert sorted(received, key=lambda r: r.repository.id) == sweeps
        gone = SqsRefreshQueue(url.replace("dashboards", "gone"), client=sqs)
        with pytest.raises(QueueUnavailableError, match=r"SendMessage to .*gone failed"):
            gone.request(sweeps[0])


# --- the path the stack deploys, end to end on a moto server ----------------------------------


@dataclass
class Deployed:
    registry: DynamoRegistry
    router: RouterService
    events: Events
    bus: str
    queue_url: str
    poller: QueuePoller
    github: DashboardGitHub
    handler: ModuleType
    now: datetime = T0

    def publish(self) -> int:
        """The publisher's work: committed events from the stream onto the bus."""
        stream = boto3.client("dynamodb").describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
        found = [event for _, event in committed_events(self._reader(stream).poll())]
        EventBusPublisher(self.bus, "ci").publish(found)
        return len(found)

    _readers: dict[str, StreamReader] | None = None

    def _reader(self, stream: str) -> StreamReader:
        if self._readers is None:
            self._readers = {}
        return self._readers.setdefault(stream, StreamReader(stream))

    def lambda_batch(self, *, wait_seconds: int = 0, max_messages: int = 10) -> dict[str, object]:
        """What Lambda's event source does: receive a batch, invoke, delete what succeeded."""
        messages = self.poller.receive(wait_seconds=wait_seconds, max_messages=max_messages)
        if not messages:
            return {}
        arn = boto3.client("sqs").get_queue_attributes(QueueUrl=self.queue_url, AttributeNames=["QueueArn"])
        answer: dict[str, object] = self.handler.handler(
            sqs_lambda_event(messages, arn["Attributes"]["QueueArn"]), FakeLambdaContext()
        )
        failed = {f["itemIdentifier"] for f in answer["batchItemFailures"]}  # type: ignore[attr-defined]
        self.poller.delete([m["ReceiptHandle"] for m in messages if m["MessageId"] not in failed])
        return answer

    def delayed(self) -> int:
        attributes = boto3.client("sqs").get_queue_attributes(
            QueueUrl=self.queue_url, AttributeNames=["ApproximateNumberOfMessagesDelayed"]
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessagesDelayed"])


@pytest.fixture
def deployed(monkeypatch: pytest.MonkeyPatch) -> Iterator[Deployed]:
    """A moto server (its in-process mock serves no DynamoDB Streams reads), provisioned as the
    local stack is: the registry with its stream, the bus, the dashboards queue and its rule."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    for name, value in {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
    }.items():
        monkeypatch.setenv(name, value)
    reset = urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST")  # noqa: S310 (loopback)
    urllib.request.urlopen(reset, timeout=10).close()  # noqa: S310 (loopback)
    try:
        boto3.client("dynamodb").create_table(
            TableName=TABLE, StreamSpecification=EVENT_STREAM, **TABLE_DEFINITION
        )
        bus, _ = provision_event_bus(None)
        url, _ = provision_dashboards(None, bus)
        registry = DynamoRegistry(TABLE)
        router = router_over(registry)
        github = DashboardGitHub()
        handler = load_handler("dashboard")
        stage = Deployed(registry, router, Events(), bus, url, QueuePoller(endpoint, url), github, handler)
        service = DashboardService(
            registry=registry,
            slots=DynamoDashboardSlots(TABLE),
            queue=SqsRefreshQueue(url),
            reader=github.reader,
            bot_login="squadron[bot]",
            clock=lambda: stage.now,
            interval=timedelta(seconds=1),  # SQS delays in whole seconds: the deferral is one second
        )
        monkeypatch.setattr(handler, "service", lambda: service)
        yield stage
    finally:
        server.stop()


def test_a_decisions_events_reach_the_dashboards_queue_and_a_burst_is_one_edit_then_one_more(
    deployed: Deployed,
) -> None:
    e = deployed.events
    deployed.router.process(e.assigned(38))
    assert deployed.publish() >= 1
    first = deployed.lambda_batch()
    assert (first["rendered"], first["unopened"]) == (["octo/repo"], ["octo/repo"])  # events edit only
    deployed.now = T0 + timedelta(seconds=1)
    SqsRefreshQueue(deployed.queue_url).request_all(  # the reconciler's tick: it opens the issue
        [RefreshRequest(repository=REPO, installation=77, cause="sweep")]
    )
    opened = deployed.lambda_batch()
    assert opened["edited"] == ["octo/repo#500"] and opened["batchItemFailures"] == []
    assert "feat-dev-38" in deployed.github.body

    # A burst within the interval (the service's clock stands still): one deferral, no edit.
    deployed.router.process(e.assigned(39))
    deployed.router.process(e.register_blocker(38, 42, agent_id="1-38-feat-dev", sleep=True))
    assert deployed.publish() >= 2
    while answer := deployed.lambda_batch(max_messages=1):
        assert answer["edited"] == [] and answer["batchItemFailures"] == []
    assert deployed.delayed() == 1 and len(deployed.github.writes) == 1

    # The interval over, the deferred request comes (SQS's delay: wait for it) and shows it all.
    deployed.now = T0 + timedelta(seconds=2)
    answer = {}
    while not answer:
        answer = deployed.lambda_batch(wait_seconds=5)
    assert answer["rendered"] == ["octo/repo"] and answer["edited"] == ["octo/repo#500"]
    assert "feat-dev-39" in deployed.github.body and "i38 -->|blocked by| i42" in deployed.github.body
    assert len(deployed.github.writes) == 2


def test_a_message_that_is_no_refresh_request_goes_back_to_the_queue(deployed: Deployed) -> None:
    sqs = boto3.client("sqs")
    sqs.send_message(QueueUrl=deployed.queue_url, MessageBody='{"repository": "octo/repo"}')
    sqs.send_message(
        QueueUrl=deployed.queue_url, MessageBody=RefreshRequest(repository=REPO, installation=77).message()
    )
    messages = deployed.poller.receive(max_messages=10)
    answer = deployed.handler.handler(
        sqs_lambda_event(messages, "arn:aws:sqs:::dashboards"), FakeLambdaContext()
    )
    (bad,) = [m["MessageId"] for m in messages if m["Body"] == '{"repository": "octo/repo"}']
    assert answer["batchItemFailures"] == [{"itemIdentifier": bad}]  # held (then dead-lettered), not lost
    assert answer["rendered"] == ["octo/repo"]  # the rest of the batch is done


def test_a_stack_without_its_app_holds_every_request(
    deployed: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    from squadron.settings import AppNotConfiguredError  # noqa: PLC0415

    def unconfigured() -> DashboardService:
        raise AppNotConfiguredError("dashboards")

    monkeypatch.setattr(deployed.handler, "service", unconfigured)
    boto3.client("sqs").send_message(
        QueueUrl=deployed.queue_url, MessageBody=RefreshRequest(repository=REPO).message()
    )
    (message,) = deployed.poller.receive(max_messages=10)
    event = sqs_lambda_event([message], "arn:aws:sqs:::dashboards")
    answer = deployed.handler.handler(event, FakeLambdaContext())
    assert answer == {"batchItemFailures": [{"itemIdentifier": message["MessageId"]}]}
    assert deployed.github.writes == []
