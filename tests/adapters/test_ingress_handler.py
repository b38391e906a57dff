"""The ingress Lambda end to end under moto: API Gateway event in, events.fifo message out."""

from __future__ import annotations

import json
import re
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import boto3
import pytest
from moto import mock_aws

from squadron.domain.events import EventEnvelope
from squadron.domain.routed import routing_interest
from squadron.domain.webhook import sign
from tests.support.emf import published_metrics
from tests.support.lambdas import FakeLambdaContext, http_api_event, load_handler
from tests.support.webhook_examples import example, load_examples

SECRET = "It's a Secret to Everybody"
APP_ID = 424242


@dataclass
class Stack:
    handler: ModuleType
    sqs: Any
    queue_url: str
    secrets: Any
    secret_arn: str

    def post(self, payload: Any, event: str, *, delivery: str | None = None, **kw: Any) -> dict[str, Any]:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        headers = {
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
            "X-Hub-Signature-256": sign(body, SECRET),
            "Content-Type": "application/json",
            "User-Agent": "GitHub-Hookshot/test",
        }
        headers.update(kw.pop("headers", {}))
        response: dict[str, Any] = self.handler.handler(
            http_api_event(body, headers, **kw), FakeLambdaContext()
        )
        response["json"] = json.loads(response["body"]) if response.get("body") else None
        return response

    def drain(self) -> list[dict[str, Any]]:
        """Receive and delete every message (FIFO: one group at a time, so loop)."""
        messages: list[dict[str, Any]] = []
        while True:
            got = self.sqs.receive_message(
                QueueUrl=self.queue_url, MaxNumberOfMessages=10, AttributeNames=["MessageGroupId"]
            ).get("Messages", [])
            if not got:
                return messages
            for message in got:
                self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"])
            messages.extend(got)


@pytest.fixture(scope="module")
def handler_module() -> ModuleType:
    return load_handler("ingress")


@pytest.fixture
def stack(handler_module: ModuleType, monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:
    with mock_aws():
        sqs = boto3.client("sqs")
        queue_url = sqs.create_queue(
            QueueName="events.fifo", Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "false"}
        )["QueueUrl"]
        secrets = boto3.client("secretsmanager")
        secret_arn = secrets.create_secret(Name="webhook-secret", SecretString=SECRET)["ARN"]
        for key, value in {
            "EVENTS_QUEUE_URL": queue_url,
            "WEBHOOK_SECRET_ARN": secret_arn,
            "GITHUB_APP_ID": str(APP_ID),
            "GITHUB_APP_SLUG": "squadron",
        }.items():
            monkeypatch.setenv(key, value)
        handler_module.ingress.cache_clear()
        yield Stack(handler_module, sqs, queue_url, secrets, secret_arn)
        handler_module.ingress.cache_clear()


def _expected_group(event: str, payload: dict[str, Any]) -> str:
    """An independent oracle for the message group id, straight from the raw payload."""
    repo = payload["repository"]["id"]
    if "issue" in payload:
        return f"{repo}#{payload['issue']['number']}"
    if "pull_request" in payload:
        return f"{repo}#{payload['pull_request']['number']}"
    if event in ("check_run", "check_suite") and payload[event].get("pull_requests"):
        return f"{repo}#{min(pr['number'] for pr in payload[event]['pull_requests'])}"
    if event == "merge_group" and (
        queued := re.fullmatch(
            r"refs/heads/gh-readonly-queue/.+/pr-(\d+)-[0-9a-f]{40}", payload[event]["head_ref"]
        )
    ):
        return f"{repo}#{queued[1]}"  # the group a merge queue built for a pull request is that PR's
    return f"{repo}#repo"


def test_every_published_example_is_enqueued_or_dropped_never_a_5xx(stack: Stack) -> None:
    outcomes: Counter[str] = Counter()
    accepted_events: set[str] = set()
    for ex in load_examples():
        delivery = str(uuid.uuid5(uuid.NAMESPACE_URL, ex.id))
        response = stack.post(ex.payload, ex.event, delivery=delivery)
        status, body = response["statusCode"], response["json"]
        assert status < 500, (ex.id, body)
        messages = stack.drain()
        if ex.event == "ping":
            assert (status, body["status"]) == (200, "pong"), ex.id
            assert messages == []
        elif routing_interest(ex.event, ex.payload.get("action")) is None:
            assert (status, body["status"]) == (202, "accepted"), (ex.id, body)
            assert len(messages) == 1, ex.id
            message = messages[0]
            envelope = EventEnvelope.from_message(message["Body"])
            assert envelope.delivery_id == delivery
            assert envelope.event == ex.event
            expected_group = _expected_group(ex.event, ex.payload)
            assert message["Attributes"]["MessageGroupId"] == expected_group == body["group"], ex.id
            accepted_events.add(ex.event)
        else:
            assert (status, body["status"]) == (202, "dropped"), (ex.id, body)
            assert body["reason"], ex.id
            assert messages == [], ex.id
        outcomes[body["status"]] += 1
    assert sum(outcomes.values()) == len(load_examples()) == 329
    assert accepted_events == {
        "issues",
        "issue_comment",
        "pull_request",
        "pull_request_review",
        "pull_request_review_comment",
        "check_run",
        "check_suite",
        "status",
        "milestone",
        "merge_group",
    }
    assert outcomes["accepted"] > 40 and outcomes["dropped"] > 200


def test_duplicate_delivery_ids_enqueue_once(stack: Stack) -> None:
    payload = example("issues", "opened")
    first = stack.post(payload, "issues", delivery="dup-0001")
    second = stack.post(payload, "issues", delivery="dup-0001")
    assert first["statusCode"] == second["statusCode"] == 202
    assert len(stack.drain()) == 1


def test_base64_encoded_body_is_verified_over_the_decoded_bytes(stack: Stack) -> None:
    response = stack.post(example("issues", "opened"), "issues", base64_encoded=True)
    assert response["statusCode"] == 202, response["json"]
    assert len(stack.drain()) == 1


def test_invalid_base64_body_is_rejected(stack: Stack) -> None:
    event = http_api_event(b"{}", {"X-GitHub-Event": "issues", "X-GitHub-Delivery": "d"})
    event.update(body="%%%not-base64", isBase64Encoded=True)
    response = stack.handler.handler(event, FakeLambdaContext())
    assert response["statusCode"] == 400
    assert "base64" in json.loads(response["body"])["reason"]


@pytest.mark.parametrize(
    ("mutate", "status", "words"),
    [
        (lambda h: h.update({"X-Hub-Signature-256": sign(b"other", SECRET)}), 401, "does not match"),
        (lambda h: h.pop("X-GitHub-Event"), 400, "X-GitHub-Event"),
        (lambda h: h.pop("X-GitHub-Delivery"), 400, "X-GitHub-Delivery"),
    ],
    ids=["wrong signature", "no event header", "no delivery header"],
)
def test_bad_requests_enqueue_nothing(stack: Stack, mutate: Any, status: int, words: str) -> None:
    body = json.dumps(example("issues", "opened")).encode()
    headers = {
        "X-GitHub-Event": "issues",
        "X-GitHub-Delivery": "d-1",
        "X-Hub-Signature-256": sign(body, SECRET),
    }
    mutate(headers)
    response = stack.handler.handler(http_api_event(body, headers), FakeLambdaContext())
    assert response["statusCode"] == status
    assert words in json.loads(response["body"])["reason"]
    assert stack.drain() == []


def test_oversized_body_is_413(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAX_BODY_BYTES", "2048")
    stack.handler.ingress.cache_clear()
    payload = example("issues", "opened")
    payload["issue"]["body"] = "x" * 4096
    response = stack.post(payload, "issues")
    assert response["statusCode"] == 413
    assert stack.drain() == []


def test_missing_secret_fails_closed(stack: Stack) -> None:
    stack.secrets.delete_secret(SecretId=stack.secret_arn, ForceDeleteWithoutRecovery=True)
    response = stack.post(example("issues", "opened"), "issues")
    assert response["statusCode"] == 500
    assert "refusing all deliveries" in response["json"]["reason"]
    assert stack.drain() == []


def test_empty_secret_fails_closed(stack: Stack) -> None:
    stack.secrets.put_secret_value(SecretId=stack.secret_arn, SecretString="   ")
    response = stack.post(example("issues", "opened"), "issues")
    assert response["statusCode"] == 500
    assert "empty" in response["json"]["reason"]


def test_queue_failure_answers_5xx_so_github_can_redeliver(stack: Stack) -> None:
    stack.sqs.delete_queue(QueueUrl=stack.queue_url)
    response = stack.post(example("issues", "opened"), "issues", delivery="lost-0001")
    assert response["statusCode"] == 503
    assert "could not be queued" in response["json"]["reason"]


def test_missing_configuration_answers_500_naming_every_variable(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EVENTS_QUEUE_URL")
    monkeypatch.setenv("GITHUB_APP_ID", "not-a-number")
    stack.handler.ingress.cache_clear()
    response = stack.post(example("issues", "opened"), "issues")
    assert response["statusCode"] == 500
    reason = response["json"]["reason"]
    assert "EVENTS_QUEUE_URL is required" in reason
    assert "GITHUB_APP_ID" in reason and "'not-a-number'" in reason


def test_before_the_app_is_configured_pings_answer_and_events_wait_at_github(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deployed with github_app_id 0: the App's ping is answered; a correctly signed event is
    refused with a 503 (GitHub keeps it as failed, to be redelivered) and nothing is queued
    that no router could act on; a forged one is still a 401."""
    monkeypatch.setenv("GITHUB_APP_ID", "0")
    stack.handler.ingress.cache_clear()
    assert stack.post(example("ping"), "ping")["statusCode"] == 200
    response = stack.post(example("issues", "opened"), "issues", delivery="early-0001")
    assert response["statusCode"] == 503
    assert "does not know its GitHub App yet" in response["json"]["reason"]
    forged = stack.post(
        example("issues", "opened"), "issues", headers={"X-Hub-Signature-256": "sha256=" + "0" * 64}
    )
    assert forged["statusCode"] == 401
    assert stack.drain() == []


def test_unknown_route_is_404(stack: Stack) -> None:
    event = http_api_event(b"{}", {}, method="GET", path="/")
    response = stack.handler.handler(event, FakeLambdaContext())
    assert response["statusCode"] == 404
    assert "POST /webhook" in json.loads(response["body"])["reason"]


def test_outcomes_are_counted_as_emf_metrics(stack: Stack, capsys: pytest.CaptureFixture[str]) -> None:
    stack.post(example("issues", "opened"), "issues")
    stack.post(example("star"), "star")
    stack.post(b"[]", "issues")
    published = published_metrics(capsys.readouterr().out)
    # Totals (service only) for the alarms and lines; each breakdown once, under its dimension.
    assert published == {
        ("WebhooksReceived", ("service",), ""): 3,
        ("WebhooksEnqueued", ("service",), ""): 1,
        ("WebhooksDropped", ("service",), ""): 1,
        ("WebhooksRejected", ("service",), ""): 1,
        ("WebhooksEnqueued", ("Event", "service"), "issues"): 1,
        ("WebhooksDropped", ("Reason", "service"), "not_routed"): 1,
        ("WebhooksRejected", ("Reason", "service"), "body_not_object"): 1,
    }


HOSTILE_BODIES = [
    ("nested-deep", b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply"),
    ("huge-number", b'{"repository": {"id": ' + b"9" * 300 + b"}}", "an integer of 300 digits"),
    ("lone-surrogate", b'{"action": "opened", "zen": "\\udfff"}', "lone UTF-16 surrogate"),
    ("duplicate-key", b'{"action": "opened", "action": "closed"}', "the key 'action' twice"),
]


@pytest.mark.parametrize(
    ("body", "code"), [c[1:] for c in HOSTILE_BODIES], ids=[c[0] for c in HOSTILE_BODIES]
)
def test_hostile_signed_bodies_are_a_precise_400_never_a_crash(stack: Stack, body: bytes, code: str) -> None:
    response = stack.post(body, "issues")
    assert (response["statusCode"], response["json"]["status"]) == (400, "rejected"), response["json"]
    assert stack.drain() == []
    assert code in response["body"] or response["json"]["reason"]


@pytest.mark.parametrize("base64_encoded", [True, False], ids=["base64", "text"])
def test_a_body_that_is_not_utf8_says_so(stack: Stack, base64_encoded: bool) -> None:
    """API Gateway passes bytes that are not UTF-8 base64-encoded; text that cannot be encoded
    back (a lone surrogate) is not UTF-8 either. Neither is "not valid base64"."""
    raw = b'{"action": "opened", "zen": "caf\xe9"}'
    headers = {
        "X-GitHub-Event": "issues",
        "X-GitHub-Delivery": "d-9",
        "X-Hub-Signature-256": sign(raw, SECRET),
    }
    event = http_api_event(raw, headers, base64_encoded=True)
    if not base64_encoded:
        event.update(body='{"zen": "caf\udce9"}', isBase64Encoded=False)
    response = stack.handler.handler(event, FakeLambdaContext())
    reason = json.loads(response["body"])["reason"]
    assert response["statusCode"] == 400
    assert "not UTF-8 text" in reason and "base64" not in reason
    assert stack.drain() == []


def test_a_label_on_a_pull_request_is_enqueued_in_its_group_for_its_pipelines(stack: Stack) -> None:
    """``pull_request.labeled`` reaches the router (a human stage waiting for a label on a pull
    request, a pipeline it triggers or steers: docs/pipelines.md), in the pull request's group."""
    payload = example("pull_request", "labeled")
    response = stack.post(payload, "pull_request")
    (message,) = stack.drain()
    assert (response["statusCode"], response["json"]["status"]) == (202, "accepted")
    envelope = EventEnvelope.from_message(message["Body"])
    assert (envelope.event, envelope.action) == ("pull_request", "labeled")
    assert envelope.label == payload["label"]["name"]
    group = f"{payload['repository']['id']}#{payload['pull_request']['number']}"
    assert message["Attributes"]["MessageGroupId"] == group
