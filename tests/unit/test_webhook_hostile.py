"""Signed but hostile webhook bodies: each gets a 4xx with a precise reason, fast, in bounded memory.

The signature is right (the attacker holds the secret, or GitHub relays what a user
wrote), so everything after it must hold. Each body is triaged in a forked child under
a memory ceiling; the answer, not a log line, is what the attacker gets.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from squadron.domain.event_fields import MAX_GITHUB_ID
from squadron.domain.events import EventEnvelope
from squadron.domain.webhook import Accepted, AppIdentity, Rejected, WebhookDecision, sign, triage_webhook
from tests.support.bounded import run_bounded
from tests.support.webhook_examples import example

SECRET = "test-webhook-secret"
APP = AppIdentity(app_id=424242, slug="squadron")
NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
CAP = 2 * 1024 * 1024


def _triage(body: bytes, event: str = "issues") -> WebhookDecision:
    headers = {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958",
        "X-Hub-Signature-256": sign(body, SECRET),
    }
    return triage_webhook(
        headers=headers, body=body, secret=SECRET, app=APP, max_body_bytes=CAP, received_at=NOW
    )


def _opened(change: Callable[[dict[str, Any]], object]) -> bytes:
    payload = example("issues", "opened")
    change(payload)
    return json.dumps(payload).encode()


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(payload: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target = payload
        for key in parents:
            target = target[key]
        target[last] = value

    return change


OPENED = json.dumps(example("issues", "opened")).encode()

# (case, body, status, code, words the reason contains)
HOSTILE: list[tuple[str, bytes, int, str, str]] = [
    (
        "nested a million deep",
        b'{"a": ' + b"[" * 1_000_000 + b"]" * 1_000_000 + b"}",
        400,
        "body_too_deep",
        "nested",
    ),
    (
        "a 200-digit repository id",
        OPENED.replace(b'"repository": {"id": ', b'"repository": {"id": ' + b"9" * 200, 1),
        400,
        "body_number_too_large",
        "an integer of 2",
    ),
    (
        "a 5000-digit number anywhere",
        b'{"x": ' + b"1" * 5000 + b"}",
        400,
        "body_number_too_large",
        "5000 digits",
    ),
    (
        "a lone surrogate in a title",
        OPENED.replace(b'"title": "', b'"title": "\\ud800', 1),
        400,
        "body_lone_surrogate",
        "lone UTF-16 surrogate",
    ),
    (
        "a lone low surrogate in a key",
        b'{"\\udc00": 1, "action": "opened"}',
        400,
        "body_lone_surrogate",
        "lone UTF-16 surrogate",
    ),
    (
        "the last of duplicate keys would win",
        b'{"action": "opened", "action": "deleted"}',
        400,
        "body_duplicate_key",
        "'action' twice",
    ),
    ("NaN", b'{"action": NaN}', 400, "body_not_json", "NaN is not a JSON value"),
    ("Infinity", b'{"action": -Infinity}', 400, "body_not_json", "-Infinity is not a JSON value"),
    ("Latin-1", '{"action": "caf\xe9"}'.encode("latin-1"), 400, "body_not_utf8", "not UTF-8"),
    (
        "a repository id of true",
        _opened(_set("repository.id", True)),
        400,
        "payload_invalid",
        "repository.id",
    ),
    ("a float repository id", _opened(_set("repository.id", 1.5)), 400, "payload_invalid", "repository.id"),
    ("a string repository id", _opened(_set("repository.id", "38")), 400, "payload_invalid", "repository.id"),
    ("a negative repository id", _opened(_set("repository.id", -1)), 400, "payload_invalid", "repository.id"),
    ("repository id zero", _opened(_set("repository.id", 0)), 400, "payload_invalid", "repository.id"),
    (
        "a repository id past 64 bits",
        _opened(_set("repository.id", MAX_GITHUB_ID + 1)),
        400,
        "payload_invalid",
        "less than or equal to 9223372036854775807",
    ),
    ("issue number zero", _opened(_set("issue.number", 0)), 400, "payload_invalid", "issue.number"),
    (
        "an issue number past 32 bits",
        _opened(_set("issue.number", 2**31)),
        400,
        "payload_invalid",
        "issue.number",
    ),
    (
        "a boolean installation",
        _opened(_set("installation", {"id": False})),
        400,
        "payload_invalid",
        "installation_id",
    ),
    ("a sender of id 0", _opened(_set("sender.id", 0)), 400, "payload_invalid", "sender.id"),
    (
        "a megabyte login",
        _opened(_set("sender.login", "a" * 1_000_000)),
        400,
        "payload_invalid",
        "sender.login",
    ),
    (
        "a megabyte label",
        _opened(_set("issue.labels", [{"name": "x" * 1_000_000}])),
        400,
        "payload_invalid",
        "issue.labels.0",
    ),
]


def _answer(body: bytes) -> tuple[str, int, str, str]:
    decision = _triage(body)
    if isinstance(decision, Rejected):
        return decision.kind, decision.status, decision.code, decision.reason
    return decision.kind, 0, "", ""


@pytest.mark.parametrize(
    ("body", "status", "code", "words"), [c[1:] for c in HOSTILE], ids=[c[0] for c in HOSTILE]
)
def test_hostile_bodies_are_refused_precisely(body: bytes, status: int, code: str, words: str) -> None:
    outcome = run_bounded(_answer, body, memory_mib=256)
    assert outcome.how == "returned", outcome.value
    assert outcome.cpu_seconds < 1.0, outcome
    kind, got_status, got_code, reason = outcome.value
    assert (kind, got_status, got_code) == ("rejected", status, code), reason
    assert words in reason


def test_a_body_at_the_cap_full_of_labels_is_trimmed_and_accepted() -> None:
    labels = [{"name": f"label-{i}", "color": "ededed"} for i in range(20_000)]
    body = _opened(_set("issue.labels", labels))
    assert len(body) < CAP
    outcome = run_bounded(_triage, body, memory_mib=256)
    assert outcome.cpu_seconds < 1.0, outcome
    assert isinstance(outcome.value, Accepted)
    assert outcome.value.envelope.issue is not None and len(outcome.value.envelope.issue.labels) == 100


def test_an_escaped_surrogate_pair_is_one_character() -> None:
    decision = _triage(OPENED.replace(b'"title": "', b'"title": "\\ud83d\\ude00 ', 1))
    assert isinstance(decision, Accepted)
    assert decision.envelope.issue is not None and decision.envelope.issue.title.startswith("\U0001f600 ")


def test_an_escaped_backslash_before_u_is_not_an_escape() -> None:
    assert isinstance(_triage(OPENED.replace(b'"title": "', b'"title": "\\\\ud800', 1)), Accepted)


SQS_CHARACTERS = frozenset(chr(c) for c in range(0x21, 0x7F))


@settings(max_examples=200, derandomize=True, deadline=None)
@given(
    repo=st.integers(min_value=1, max_value=MAX_GITHUB_ID),
    number=st.integers(min_value=1, max_value=2**31 - 1),
    delivery=st.text(st.sampled_from(sorted(SQS_CHARACTERS)), min_size=1, max_size=128),
)
def test_group_and_deduplication_ids_always_fit_sqs(repo: int, number: int, delivery: str) -> None:
    envelope = EventEnvelope.model_validate(
        {
            "delivery_id": delivery,
            "event": "issues",
            "action": "opened",
            "received_at": NOW,
            "repository": {"id": repo, "full_name": "octo/app"},
            "sender": {"login": "alice", "id": 1},
            "issue": {"number": number, "title": "t", "state": "open"},
        }
    )
    for value in (envelope.message_group_id, envelope.delivery_id):
        assert 1 <= len(value) <= 128 and set(value) <= SQS_CHARACTERS
