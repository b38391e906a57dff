"""The trimmed event envelope: fields, truncation, message groups, size bound."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from squadron.domain.event_fields import MAX_BODY_BYTES, truncate_utf8
from squadron.domain.event_trimming import build_envelope
from squadron.domain.events import MAX_ENVELOPE_BYTES, EnvelopeError, EventEnvelope
from squadron.domain.routed import ROUTED_EVENTS, routing_interest
from tests.support.webhook_examples import example, load_examples

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


def _envelope(event: str, payload: dict[str, Any]) -> EventEnvelope:
    return build_envelope(event=event, delivery_id="d-1", payload=payload, received_at=NOW)


@pytest.mark.parametrize(
    ("text", "limit", "expected", "cut"),
    [
        ("", 10, "", False),
        ("hello", 5, "hello", False),
        ("hello", 4, "hell", True),
        ("héllo", 2, "h", True),  # é is two bytes: never split a character
        ("😀😀", 5, "😀", True),
    ],
    ids=["empty", "fits", "ascii cut", "two-byte boundary", "four-byte boundary"],
)
def test_truncate_utf8(text: str, limit: int, expected: str, cut: bool) -> None:
    assert truncate_utf8(text, limit) == (expected, cut)


@pytest.mark.parametrize(
    ("event", "action", "group_suffix", "check"),
    [
        ("issues", "opened", "#1", lambda e: e.issue is not None and e.issue.title),
        ("issues", "labeled", "#1", lambda e: e.label is not None),
        ("issues", "assigned", "#1", lambda e: e.assignee is not None),
        (
            "issue_comment",
            "created",
            "#1",
            lambda e: e.comment is not None and e.comment.kind == "issue_comment",
        ),
        ("pull_request", "opened", "#2", lambda e: e.pull_request is not None and e.pull_request.head_sha),
        ("pull_request_review", "submitted", "#2", lambda e: e.review is not None and e.review.state),
        (
            "pull_request_review_comment",
            "created",
            "#2",
            lambda e: e.comment is not None and e.comment.kind == "review_comment" and e.comment.path,
        ),
        (
            "check_run",
            "completed",
            "#2",
            lambda e: e.check is not None and e.check.pull_request_numbers == (2,),
        ),
        ("check_suite", "completed", None, lambda e: e.check is not None and e.check.head_sha),
        ("status", None, "#repo", lambda e: e.status is not None and e.status.branches),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_envelope_carries_routing_fields_and_group(
    event: str, action: str | None, group_suffix: str | None, check: Any
) -> None:
    payload = example(event, action)
    envelope = _envelope(event, payload)
    assert envelope.event == event
    assert envelope.action == action
    assert envelope.repository.id == payload["repository"]["id"]
    assert envelope.sender.login == payload["sender"]["login"]
    assert check(envelope)
    if group_suffix is not None:
        assert envelope.message_group_id == f"{payload['repository']['id']}{group_suffix}"


def test_check_run_without_pull_requests_groups_per_repository() -> None:
    payload = example("check_run", "completed")
    payload["check_run"]["pull_requests"] = []
    assert _envelope("check_run", payload).message_group_id.endswith("#repo")


def test_check_run_on_several_pull_requests_groups_on_the_lowest() -> None:
    payload = example("check_run", "completed")
    prs = payload["check_run"]["pull_requests"]
    payload["check_run"]["pull_requests"] = [{**prs[0], "number": 9}, {**prs[0], "number": 4}]
    assert _envelope("check_run", payload).message_group_id.endswith("#4")


def test_issue_comment_on_a_pull_request_is_marked() -> None:
    payload = example("issue_comment", "created")
    payload["issue"]["pull_request"] = {"url": "https://api.github.com/repos/o/r/pulls/1"}
    envelope = _envelope("issue_comment", payload)
    assert envelope.issue is not None and envelope.issue.is_pull_request


def test_long_bodies_are_truncated_and_flagged() -> None:
    payload = example("issue_comment", "created")
    payload["issue"]["body"] = "x" * (MAX_BODY_BYTES * 3)
    payload["comment"]["body"] = "ü" * MAX_BODY_BYTES
    envelope = _envelope("issue_comment", payload)
    assert envelope.issue is not None and envelope.comment is not None
    assert envelope.issue.body_truncated and len(envelope.issue.body.encode()) == MAX_BODY_BYTES
    assert envelope.comment.body_truncated and len(envelope.comment.body.encode()) <= MAX_BODY_BYTES


@settings(max_examples=40, deadline=None)
@given(
    body=st.text(min_size=0, max_size=40_000),
    title=st.text(min_size=0, max_size=2_000),
    labels=st.lists(st.text(min_size=1, max_size=60), max_size=300),
)
def test_serialized_envelope_never_exceeds_the_bound(body: str, title: str, labels: list[str]) -> None:
    payload = example("pull_request_review", "submitted")
    payload["pull_request"]["body"] = body
    payload["pull_request"]["title"] = title
    payload["pull_request"]["labels"] = [{"name": name} for name in labels]
    payload["review"]["body"] = body[::-1]
    envelope = _envelope("pull_request_review", payload)
    message = envelope.to_message()
    assert len(message.encode("utf-8")) <= MAX_ENVELOPE_BYTES
    assert EventEnvelope.from_message(message) == envelope


def test_round_trip_over_every_routed_example() -> None:
    routed = [ex for ex in load_examples() if routing_interest(ex.event, ex.payload.get("action")) is None]
    assert len(routed) > 30
    for ex in routed:
        envelope = _envelope(ex.event, ex.payload)
        assert EventEnvelope.from_message(envelope.to_message()) == envelope, ex.id


@pytest.mark.parametrize(
    ("mutate", "words"),
    [
        (lambda p: p.pop("repository"), "no 'repository'"),
        (lambda p: p.pop("sender"), "no 'sender'"),
        (lambda p: p["issue"].pop("number"), "issue.number"),
        (lambda p: p["repository"].update(id="not-a-number"), "repository.id"),
    ],
    ids=["no repository", "no sender", "issue without number", "repository id not int"],
)
def test_malformed_payloads_name_the_field(mutate: Any, words: str) -> None:
    payload = example("issues", "opened")
    mutate(payload)
    with pytest.raises(EnvelopeError, match=words.replace("'", ".")):
        _envelope("issues", payload)


def test_routed_events_table_is_consistent() -> None:
    assert routing_interest("issues", "opened") is None
    assert routing_interest("status", None) is None
    assert routing_interest("issues", "pinned") == "action 'pinned' of event 'issues' is not routed"
    assert routing_interest("push", None) == "event 'push' is not routed"
    for actions in ROUTED_EVENTS.values():
        assert actions is None or all(a.islower() for a in actions)
