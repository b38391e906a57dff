"""triage_webhook: the pure decision for one webhook request."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from squadron.domain.webhook import (
    Accepted,
    AppIdentity,
    Dropped,
    Pong,
    Rejected,
    WebhookDecision,
    sign,
    signature_problem,
    triage_webhook,
)
from tests.support.webhook_examples import example

SECRET = "test-webhook-secret"
APP = AppIdentity(app_id=424242, slug="squadron")
NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
DELIVERY = "72d3162e-cc78-11e3-81ab-4c9367dc0958"
CAP = 64 * 1024


def test_github_documented_signature_vector() -> None:
    # docs.github.com "Validating webhook deliveries": this exact secret/payload/signature.
    body = b"Hello, World!"
    expected = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    assert sign(body, "It's a Secret to Everybody") == expected
    assert signature_problem(body, expected, "It's a Secret to Everybody") is None
    assert (
        signature_problem(body, expected.upper().replace("SHA256=", "sha256="), "It's a Secret to Everybody")
        is None
    )
    assert signature_problem(body + b" ", expected, "It's a Secret to Everybody") is not None


def test_empty_secret_never_verifies() -> None:
    body = b"{}"
    assert signature_problem(body, sign(body, ""), "") == "no webhook secret is configured"


def _headers(body: bytes, event: str = "issues", /, **overrides: str | None) -> dict[str, str]:
    headers: dict[str, str | None] = {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": DELIVERY,
        "X-Hub-Signature-256": sign(body, SECRET),
        "Content-Type": "application/json",
    }
    headers.update(overrides)
    return {k: v for k, v in headers.items() if v is not None}


def _triage(headers: dict[str, str], body: bytes) -> WebhookDecision:
    return triage_webhook(
        headers=headers, body=body, secret=SECRET, app=APP, max_body_bytes=CAP, received_at=NOW
    )


def _body(payload: Any) -> bytes:
    return json.dumps(payload).encode()


ISSUE_OPENED = _body(example("issues", "opened"))

# (id, headers, body, expected status, expected code, words the reason must contain)
BAD_INPUTS: list[tuple[str, dict[str, str], bytes, int, str, str]] = [
    (
        "tampered body",
        _headers(ISSUE_OPENED),
        ISSUE_OPENED.replace(b'"opened"', b'"closed"', 1),
        401,
        "signature_invalid",
        "does not match",
    ),
    (
        "signed with another secret",
        _headers(ISSUE_OPENED, **{"X-Hub-Signature-256": sign(ISSUE_OPENED, "other")}),
        ISSUE_OPENED,
        401,
        "signature_invalid",
        "does not match",
    ),
    (
        "sha1-only header",
        _headers(ISSUE_OPENED, **{"X-Hub-Signature-256": None, "X-Hub-Signature": "sha1=" + "0" * 40}),
        ISSUE_OPENED,
        401,
        "signature_missing",
        "SHA-1",
    ),
    (
        "no signature at all",
        _headers(ISSUE_OPENED, **{"X-Hub-Signature-256": None}),
        ISSUE_OPENED,
        401,
        "signature_missing",
        "missing",
    ),
    (
        "malformed signature",
        _headers(ISSUE_OPENED, **{"X-Hub-Signature-256": "sha256=xyz"}),
        ISSUE_OPENED,
        401,
        "signature_invalid",
        "malformed",
    ),
    ("empty body", _headers(b""), b"", 400, "body_empty", "empty"),
    ("JSON array", _headers(b"[1, 2]"), b"[1, 2]", 400, "body_not_object", "not an object"),
    ("JSON string", _headers(b'"hi"'), b'"hi"', 400, "body_not_object", "got str"),
    ("not JSON", _headers(b"payload=%7B%7D"), b"payload=%7B%7D", 400, "body_not_json", "not JSON"),
    ("not UTF-8", _headers(b"\xff\xfe{}"), b"\xff\xfe{}", 400, "body_not_utf8", "UTF-8"),
    ("huge body", {}, b"{" + b" " * CAP + b"}", 413, "body_too_large", "over the 65536 cap"),
    (
        "missing event header",
        _headers(ISSUE_OPENED, **{"X-GitHub-Event": None}),
        ISSUE_OPENED,
        400,
        "event_header_missing",
        "X-GitHub-Event",
    ),
    (
        "garbage event header",
        _headers(ISSUE_OPENED, **{"X-GitHub-Event": "issues; DROP TABLE"}),
        ISSUE_OPENED,
        400,
        "event_header_invalid",
        "not an event name",
    ),
    (
        "missing delivery header",
        _headers(ISSUE_OPENED, **{"X-GitHub-Delivery": None}),
        ISSUE_OPENED,
        400,
        "delivery_header_missing",
        "X-GitHub-Delivery",
    ),
    (
        "delivery id too long for a dedup id",
        _headers(ISSUE_OPENED, **{"X-GitHub-Delivery": "a" * 129}),
        ISSUE_OPENED,
        400,
        "delivery_header_invalid",
        "not a delivery id",
    ),
    (
        "routed event without repository",
        _headers(b'{"action": "opened", "sender": {"login": "a", "id": 1}}'),
        b'{"action": "opened", "sender": {"login": "a", "id": 1}}',
        400,
        "payload_invalid",
        "no 'repository'",
    ),
]


@pytest.mark.parametrize(
    ("headers", "body", "status", "code", "words"),
    [case[1:] for case in BAD_INPUTS],
    ids=[case[0] for case in BAD_INPUTS],
)
def test_bad_inputs_are_rejected_with_a_precise_reason(
    headers: dict[str, str], body: bytes, status: int, code: str, words: str
) -> None:
    decision = _triage(headers, body)
    assert isinstance(decision, Rejected)
    assert (decision.status, decision.code) == (status, code)
    assert words in decision.reason


def test_headers_are_case_insensitive() -> None:
    lower = {k.lower(): v for k, v in _headers(ISSUE_OPENED).items()}
    assert isinstance(_triage(lower, ISSUE_OPENED), Accepted)


def test_signed_ping_is_a_pong() -> None:
    body = _body(example("ping"))
    decision = _triage(_headers(body, "ping"), body)
    assert isinstance(decision, Pong)
    assert decision.delivery_id == DELIVERY
    assert decision.zen


def test_unsigned_ping_is_rejected() -> None:
    body = _body(example("ping"))
    decision = _triage(_headers(body, "ping", **{"X-Hub-Signature-256": None}), body)
    assert isinstance(decision, Rejected)
    assert decision.status == 401


def _own(payload: dict[str, Any]) -> dict[str, Any]:
    payload["sender"] = {"login": "squadron[bot]", "id": 99, "type": "Bot"}
    return payload


def _via_app(payload: dict[str, Any], key: str, app_id: int) -> dict[str, Any]:
    payload[key]["performed_via_github_app"] = {"id": app_id, "slug": "whatever"}
    return payload


# (id, event, payload, expected code or None when accepted)
DROP_CASES: list[tuple[str, str, dict[str, Any], str | None]] = [
    ("own bot opened an issue", "issues", _own(example("issues", "opened")), "own_event"),
    ("own bot commented", "issue_comment", _own(example("issue_comment", "created")), "own_event"),
    ("own bot opened a PR", "pull_request", _own(example("pull_request", "opened")), "own_event"),
    (
        "issue opened via the App by a user token",
        "issues",
        _via_app(example("issues", "opened"), "issue", APP.app_id),
        "own_event",
    ),
    (
        "comment created via the App",
        "issue_comment",
        _via_app(example("issue_comment", "created"), "comment", APP.app_id),
        "own_event",
    ),
    (
        "human labels an App-created issue",
        "issues",
        _via_app(example("issues", "labeled"), "issue", APP.app_id),
        None,
    ),
    (
        "human comments on an App-created issue",
        "issue_comment",
        _via_app(example("issue_comment", "created"), "issue", APP.app_id),
        None,
    ),
    (
        "comment created via another App",
        "issue_comment",
        _via_app(example("issue_comment", "created"), "comment", 1),
        None,
    ),
    ("another bot's check run", "check_run", example("check_run", "completed"), None),
    ("unrouted event", "star", example("star"), "not_routed"),
    ("unrouted action", "issues", example("issues", "pinned"), "not_routed"),
    ("unrouted action of a routed event", "check_run", example("check_run", "created"), "not_routed"),
    ("routed event without action", "status", example("status"), None),
]


@pytest.mark.parametrize(
    ("event", "payload", "code"), [c[1:] for c in DROP_CASES], ids=[c[0] for c in DROP_CASES]
)
def test_own_and_unrouted_events_are_dropped(event: str, payload: dict[str, Any], code: str | None) -> None:
    body = _body(payload)
    decision = _triage(_headers(body, event), body)
    if code is None:
        assert isinstance(decision, Accepted), decision
    else:
        assert isinstance(decision, Dropped), decision
        assert decision.code == code
        assert decision.delivery_id == DELIVERY
