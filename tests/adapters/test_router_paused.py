"""A repository breaks its configuration: the router Lambda pauses it, tells it once, and resumes.

The router is wired as it is deployed (``assemble_router``: policy cache, config loader
over the contents API, notices, merge gate, delivery records) over DynamoDB and
events.fifo under moto and the GitHub fake; only ECS is the routing tests' launcher.
Records come from a moto FIFO queue through the real Lambda handler, so what the
attacker gets is what the queue and the DLQ would see.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import boto3
import httpx
import pytest
from moto import mock_aws

from squadron.adapters.delivery_records import DeliveryRecords
from squadron.adapters.dynamo_registry import TABLE_DEFINITION, DynamoRegistry
from squadron.adapters.github.auth import GitHubApp
from squadron.adapters.github.for_router import AppGitHub
from squadron.adapters.github.http import GitHubHttp
from squadron.adapters.sqs import SqsEventQueue
from squadron.domain.config_notice import NOTICE_LABEL, NOTICE_TITLE, RESOLVED, marker
from squadron.domain.events import EventEnvelope
from squadron.shell.wiring import assemble_router
from tests.support.emf import published_metrics, totals
from tests.support.events import BOT, Events
from tests.support.fake_registry import FakeLauncher
from tests.support.github_fake import FakeGitHub, app_private_key
from tests.support.lambdas import FakeLambdaContext, load_handler, sqs_lambda_event

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

handler_module = load_handler("router")

APP, OTHER = "octo/app", "octo/other"
#: The fixed routing's: an assignment starts its agent here (no Step Functions to carry out a run).
VALID = {".squadron/config.yaml": "version: 1\nmax_issue_depth: 4\norchestration: fixed\n"}
LAUGHS = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=False)
)
BILLION_LAUGHS = {".squadron/config.yaml": LAUGHS}
NOT_UTF8 = {".squadron/config.yaml": b"project:\n  name: caf\xe9\n"}


@dataclass
class Stack:
    github: FakeGitHub
    launcher: FakeLauncher
    registry: DynamoRegistry
    sqs: SQSClient
    queue_url: str
    queue_arn: str
    app: Events
    other: Events

    def route(self, *envelopes: EventEnvelope) -> dict[str, Any]:
        """Put ``envelopes`` on events.fifo, invoke the router once, delete what succeeded."""
        for envelope in envelopes:
            self.sqs.send_message(
                QueueUrl=self.queue_url,
                MessageBody=envelope.to_message(),
                MessageGroupId=envelope.message_group_id,
                MessageDeduplicationId=envelope.delivery_id,
            )
        messages = self.sqs.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=10,
            MessageSystemAttributeNames=["All"],
            VisibilityTimeout=0,
        ).get("Messages", [])
        assert len(messages) == len(envelopes)
        response: dict[str, Any] = handler_module.handler(
            sqs_lambda_event(messages, self.queue_arn), FakeLambdaContext()
        )
        failed = {item["itemIdentifier"] for item in response["batchItemFailures"]}
        for message in messages:
            if message["MessageId"] not in failed:
                self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"])
        return response

    def notices(self, repo: str = APP) -> list[dict[str, Any]]:
        assert self.github.issues is not None
        return [
            issue
            for issue in self.github.issues.get(repo, {}).values()
            if {"name": NOTICE_LABEL} in issue["labels"]
        ]

    def notice_writes(self) -> list[str]:
        return [
            f"{r.method} {r.url.path.removeprefix('/repos/octo/app')}"
            for r in self.github.requests
            if r.method != "GET" and r.url.path.startswith(f"/repos/{APP}/issues")
        ]

    def launched(self) -> list[str]:
        return sorted(agent for agent, _, _ in self.launcher.launched.values())


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:
    with mock_aws():
        dynamodb = boto3.client("dynamodb")
        dynamodb.create_table(TableName="registry", **TABLE_DEFINITION)
        sqs = boto3.client("sqs")
        url = sqs.create_queue(
            QueueName="events.fifo", Attributes={"FifoQueue": "true", "VisibilityTimeout": "0"}
        )["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        github = FakeGitHub(issues={})
        github.commit(VALID, "a" * 40, repo=APP)
        github.commit(VALID, "b" * 40, repo=OTHER)
        private, _ = app_private_key()
        http = GitHubHttp(transport=github.transport(), sleep=lambda s: None)
        launcher = FakeLauncher()
        registry = DynamoRegistry("registry", client=dynamodb)
        runtime = assemble_router(
            github=AppGitHub(GitHubApp(app_id=42, http=http, private_key=lambda: private)),
            registry=registry,
            launcher=launcher,
            queue=SqsEventQueue(url, client=sqs),
            records=DeliveryRecords("registry", client=dynamodb),
            bot_login=BOT,
            policy_ttl=timedelta(0),  # every event re-reads the default branch's head
        )
        monkeypatch.setattr(handler_module, "runtime", lambda: runtime)
        yield Stack(
            github,
            launcher,
            registry,
            sqs,
            url,
            arn,
            Events(repo_id=1, full_name=APP),
            Events(repo_id=2, full_name=OTHER, _ids=itertools.count(1000)),  # delivery ids of its own
        )


def test_a_broken_configuration_pauses_its_repository_tells_it_once_and_resumes(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    # A valid configuration: nothing to tell (one look for an old notice), work starts.
    assert stack.route(stack.app.assigned(30)) == {"batchItemFailures": []}
    assert stack.launched() == ["1-30-feat-dev"]
    assert stack.notices() == []

    # The default branch gets a billion laughs; another repository is fine.
    stack.github.commit(BILLION_LAUGHS, "c" * 40, repo=APP)
    assigned = stack.app.assigned(38)
    capsys.readouterr()
    response = stack.route(assigned, stack.other.assigned(39), stack.app.comment(30))

    assert response == {"batchItemFailures": []}  # handled: nothing retried, nothing dead-lettered
    assert stack.launched() == ["1-30-feat-dev", "2-39-feat-dev"]  # the other repository goes on
    assert stack.registry.get_agent("1-38-feat-dev") is None  # nothing new starts in the paused one
    assert [item.kind for item in stack.registry.pending_inbox("1-30-feat-dev")] == ["comment"]
    assert totals(published_metrics(capsys.readouterr().out))["DeliveriesPaused"] == 2
    (notice,) = stack.notices()
    assert notice["title"] == NOTICE_TITLE and notice["state"] == "open"
    assert "config.yaml:5: e.1.5.2.2.4: expands to more than 20000 values" in notice["body"]
    assert "cccccccccccc" in notice["body"]

    # More events, the same problems: told once.
    stack.route(stack.app.comment(30, "still there?"))
    assert stack.notice_writes() == ["POST /issues"]

    # Other problems: the notice says so.
    stack.github.commit(NOT_UTF8, "d" * 40, repo=APP)
    stack.route(stack.app.comment(30, "and now?"))
    (notice,) = stack.notices()
    assert "config.yaml:2: is not UTF-8 text: byte 0xe9" in notice["body"]
    assert stack.notice_writes() == ["POST /issues", "PATCH /issues/1"]

    # Fixed: routing resumes, the notice is closed, and the delivery that was paused is routed
    # in full when it comes again (the reconciler's replay, a redelivery).
    stack.github.commit(VALID, "e" * 40, repo=APP)
    assert stack.route(assigned) == {"batchItemFailures": []}
    assert stack.launched() == ["1-30-feat-dev", "1-38-feat-dev", "2-39-feat-dev"]
    (notice,) = stack.notices()
    assert notice["state"] == "closed" and notice["body"].endswith(marker(RESOLVED))
    assert notice["comments_made"] == [
        "[squadron:framework] The configuration is valid again at eeeeeeeeeeee; Squadron resumed."
    ]
    assert stack.notices(OTHER) == []


def test_a_repository_broken_from_its_first_event_is_paused_with_the_defaults(stack: Stack) -> None:
    stack.github.commit({".squadron/config.yaml": "x: " + "[" * 5000 + "]" * 5000}, "c" * 40, repo=APP)
    assert stack.route(stack.app.opened(38), stack.app.assigned(39)) == {"batchItemFailures": []}
    assert stack.launched() == []  # no PM, no dev agent
    (notice,) = stack.notices()
    assert "nested more than 32 levels deep" in notice["body"]


def test_telling_the_repository_may_fail_without_failing_its_events(stack: Stack) -> None:
    """GitHub refuses to list issues (they are turned off): the events are handled all the same,
    and the next check tries again."""
    stack.github.commit(BILLION_LAUGHS, "c" * 40, repo=APP)
    stack.github.faults[f"GET /repos/{APP}/issues"] = httpx.Response(
        410, json={"message": "Issues are disabled for this repo"}
    )
    assert stack.route(stack.app.assigned(38)) == {"batchItemFailures": []}
    assert stack.registry.get_agent("1-38-feat-dev") is None
    assert stack.notices() == []

    stack.github.faults.clear()
    assert stack.route(stack.app.comment(38)) == {"batchItemFailures": []}
    assert [notice["title"] for notice in stack.notices()] == [NOTICE_TITLE]
