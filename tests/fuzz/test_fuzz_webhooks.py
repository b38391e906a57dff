"""Fuzzing the ingress: any signed body is a 2xx or a 4xx, and what is queued fits SQS."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given

from squadron.domain.events import MAX_ENVELOPE_BYTES, EventEnvelope
from squadron.domain.webhook import sign
from squadron.settings import IngressSettings
from squadron.shell.ingress import WebhookIngress
from tests.fuzz import CPU_SECONDS, DEADLINE_SECONDS, FUZZ, MEMORY_MIB
from tests.fuzz.strategies import webhook_bodies
from tests.support.bounded import run_bounded

SECRET = "fuzz-secret"
SETTINGS = IngressSettings.model_validate(
    {
        "EVENTS_QUEUE_URL": "https://sqs.example/events.fifo",
        "WEBHOOK_SECRET_ARN": "arn:secret",
        "GITHUB_APP_ID": "424242",
        "GITHUB_APP_SLUG": "squadron",
    }
)
SQS_CHARACTERS = frozenset(chr(c) for c in range(0x21, 0x7F))


class Queue:
    def __init__(self) -> None:
        self.sent: list[EventEnvelope] = []

    def send(self, envelope: EventEnvelope) -> str:
        self.sent.append(envelope)
        return "m-1"


class Secrets:
    def get(self, secret_id: str) -> str:
        return SECRET


def _ingest(event: str, body: bytes) -> tuple[int, str, list[str]]:
    queue = Queue()
    ingress = WebhookIngress(
        SETTINGS, queue=queue, secrets=Secrets(), clock=lambda: datetime(2026, 11, 22, tzinfo=UTC)
    )
    headers = {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958",
        "X-Hub-Signature-256": sign(body, SECRET),
    }
    outcome = ingress.handle(headers, body)
    problems = []
    for envelope in queue.sent:
        message = envelope.to_message()
        if len(message.encode()) > MAX_ENVELOPE_BYTES:
            problems.append("message too large")
        for value in (envelope.message_group_id, envelope.delivery_id):
            if not (1 <= len(value) <= 128 and set(value) <= SQS_CHARACTERS):
                problems.append(f"not an SQS id: {value!r}")
        if EventEnvelope.from_message(message) != envelope:
            problems.append("the router would read another envelope")
    return outcome.status_code, outcome.code, problems


@FUZZ
@given(webhook_bodies())
def test_any_signed_body_is_a_2xx_or_a_precise_4xx(case: tuple[str, bytes]) -> None:
    event, body = case
    outcome = run_bounded(_ingest, event, body, memory_mib=MEMORY_MIB, deadline=DEADLINE_SECONDS)
    assert outcome.how == "returned", outcome.value
    assert outcome.cpu_seconds < CPU_SECONDS, outcome
    status, code, problems = outcome.value
    assert status in (200, 202, 400, 401, 413), (status, code)
    assert problems == []
