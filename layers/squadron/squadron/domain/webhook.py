"""Deciding what to do with one incoming webhook request — pure, no I/O.

:func:`triage_webhook` takes the raw request (headers and body bytes), the
webhook secret and the App's identity, and returns one decision:

- :class:`Rejected` — the request is not a valid GitHub delivery (4xx) and is
  answered with a precise reason;
- :class:`Pong` — a signed ``ping``;
- :class:`Dropped` — a valid delivery the router would never act on (202);
- :class:`Accepted` — a valid delivery trimmed into an envelope to enqueue.

The signature is checked over the raw bytes with a constant-time compare, as
GitHub documents, before anything else in the body is looked at.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from squadron.domain.routed import performed_by_app, routing_interest

if TYPE_CHECKING:
    from squadron.domain.events import EventEnvelope

SIGNATURE_HEADER = "x-hub-signature-256"
LEGACY_SIGNATURE_HEADER = "x-hub-signature"
EVENT_HEADER = "x-github-event"
DELIVERY_HEADER = "x-github-delivery"

_SIGNATURE_RE = re.compile(r"sha256=([0-9a-fA-F]{64})")
_EVENT_RE = re.compile(r"[a-z][a-z0-9_]{0,63}")
# GitHub delivery ids are GUIDs; the id becomes the SQS deduplication id (≤128 chars).
_DELIVERY_RE = re.compile(r"[A-Za-z0-9-]{1,128}")


def sign(body: bytes, secret: str | bytes) -> str:
    """The ``X-Hub-Signature-256`` value GitHub sends for ``body``."""
    key = secret.encode("utf-8") if isinstance(secret, str) else secret
    return "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()


def signature_problem(body: bytes, header: str | None, secret: str | bytes) -> str | None:
    """Why ``header`` does not authenticate ``body`` under ``secret``, or ``None`` if it does."""
    if not secret:
        # Never reachable through the shell (it fails closed first), but a pure
        # function must not turn an empty key into a pass either.
        return "no webhook secret is configured"
    if header is None:
        return "X-Hub-Signature-256 header is missing"
    match = _SIGNATURE_RE.fullmatch(header.strip())
    if match is None:
        return "X-Hub-Signature-256 header is malformed (expected 'sha256=' and 64 hex digits)"
    expected = sign(body, secret)
    if not hmac.compare_digest(expected, "sha256=" + match.group(1).lower()):
        return "X-Hub-Signature-256 does not match the body"
    return None


def app_bot_login(slug: str) -> str:
    """The login GitHub gives the App of ``slug`` (its issues, PRs, reviews and assignments)."""
    return f"{slug}[bot]"


@dataclass(frozen=True)
class AppIdentity:
    app_id: int
    slug: str

    @property
    def bot_login(self) -> str:
        return app_bot_login(self.slug)


@dataclass(frozen=True)
class Rejected:
    status: int
    code: str
    reason: str
    kind: Literal["rejected"] = "rejected"


@dataclass(frozen=True)
class Pong:
    delivery_id: str
    zen: str | None
    hook_id: int | None
    kind: Literal["pong"] = "pong"


@dataclass(frozen=True)
class Dropped:
    delivery_id: str
    event: str
    action: str | None
    code: str
    reason: str
    kind: Literal["dropped"] = "dropped"


@dataclass(frozen=True)
class Accepted:
    envelope: EventEnvelope
    kind: Literal["accepted"] = "accepted"


WebhookDecision = Rejected | Pong | Dropped | Accepted


def _lower_keys(headers: Mapping[str, str]) -> dict[str, str]:
    return {key.lower(): value for key, value in headers.items()}


#: Longest integer the ingress reads (GitHub's ids are 64-bit: at most 19 digits).
MAX_JSON_INT_DIGITS = 20
#: A ``\uXXXX`` escape of a UTF-16 surrogate: paired, it is one character; alone, no text.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SURROGATE = re.compile("[\ud800-\udfff]")


class _Refused(Exception):
    """Internal: the JSON is refused while it is read (a hook of ``json.loads`` raised it)."""

    def __init__(self, code: str, reason: str) -> None:
        self.code = code
        self.reason = reason
        super().__init__(reason)


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        counted = Counter(key for key, _ in pairs)
        twice = next(key for key, _ in pairs if counted[key] > 1)
        raise _Refused("body_duplicate_key", f"the JSON has the key {twice[:80]!r} twice in one object")
    return found


def _integer(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_JSON_INT_DIGITS:
        raise _Refused(
            "body_number_too_large",
            f"the JSON has an integer of {digits} digits (GitHub's are 64-bit, at most 19)",
        )
    return int(text)


def _constant(name: str) -> Any:
    raise _Refused("body_not_json", f"the body is not JSON: {name} is not a JSON value")


def _lone_surrogate(value: Any) -> bool:
    """Whether a string anywhere in ``value`` (keys too) holds half a UTF-16 surrogate pair."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _parse_object(body: bytes) -> dict[str, Any] | Rejected:
    """The body as one JSON object — strictly: UTF-8, no duplicate keys, no NaN, integers that
    can be ids, strings that are text, nesting Python can read; or why not."""
    try:
        # Decode strictly: json.loads(bytes) would also sniff UTF-16/32, which GitHub never sends.
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Rejected(400, "body_not_utf8", f"the body is not UTF-8 text (byte {exc.start}: {exc.reason})")
    try:
        parsed = json.loads(text, object_pairs_hook=_object, parse_int=_integer, parse_constant=_constant)
    except _Refused as exc:
        return Rejected(400, exc.code, exc.reason)
    except RecursionError:
        return Rejected(400, "body_too_deep", "the JSON is nested too deeply to be a webhook")
    except json.JSONDecodeError as exc:
        return Rejected(400, "body_not_json", f"the body is not JSON: {exc.msg} at line {exc.lineno}")
    except ValueError as exc:  # anything else json.loads refuses to read
        return Rejected(400, "body_not_json", f"the body is not JSON: {exc}"[:300])
    if not isinstance(parsed, dict):
        return Rejected(
            400, "body_not_object", f"the body is JSON but not an object (got {type(parsed).__name__})"
        )
    if _SURROGATE_ESCAPE.search(text) and _lone_surrogate(parsed):
        return Rejected(
            400,
            "body_lone_surrogate",
            "the JSON has a lone UTF-16 surrogate escape (\\ud800-\\udfff) in a string: it is not text",
        )
    return parsed


def triage_webhook(
    *,
    headers: Mapping[str, str],
    body: bytes,
    secret: str | bytes,
    app: AppIdentity,
    max_body_bytes: int,
    received_at: datetime,
) -> WebhookDecision:
    """Decide what one webhook request becomes. See the module docstring."""
    h = _lower_keys(headers)
    if len(body) > max_body_bytes:
        return Rejected(
            413, "body_too_large", f"the body is {len(body)} bytes, over the {max_body_bytes} cap"
        )
    if SIGNATURE_HEADER not in h and LEGACY_SIGNATURE_HEADER in h:
        return Rejected(
            401,
            "signature_missing",
            "X-Hub-Signature-256 header is missing (the SHA-1 X-Hub-Signature is not accepted)",
        )
    problem = signature_problem(body, h.get(SIGNATURE_HEADER), secret)
    if problem is not None:
        code = "signature_missing" if SIGNATURE_HEADER not in h else "signature_invalid"
        return Rejected(401, code, problem)

    event = h.get(EVENT_HEADER, "").strip()
    delivery_id = h.get(DELIVERY_HEADER, "").strip()
    if not event:
        return Rejected(400, "event_header_missing", "X-GitHub-Event header is missing")
    if not _EVENT_RE.fullmatch(event):
        return Rejected(
            400, "event_header_invalid", f"X-GitHub-Event header is not an event name: {event[:80]!r}"
        )
    if not delivery_id:
        return Rejected(400, "delivery_header_missing", "X-GitHub-Delivery header is missing")
    if not _DELIVERY_RE.fullmatch(delivery_id):
        return Rejected(
            400,
            "delivery_header_invalid",
            f"X-GitHub-Delivery header is not a delivery id: {delivery_id[:80]!r}",
        )
    if not body:
        return Rejected(400, "body_empty", "the body is empty")
    payload = _parse_object(body)
    if isinstance(payload, Rejected):
        return payload

    if event == "ping":
        hook_id = payload.get("hook_id")
        zen = payload.get("zen")
        return Pong(
            delivery_id, zen if isinstance(zen, str) else None, hook_id if isinstance(hook_id, int) else None
        )

    raw_action = payload.get("action")
    action = raw_action if isinstance(raw_action, str) else None
    if performed_by_app(event, action, payload, app_id=app.app_id, app_slug=app.slug):
        return Dropped(delivery_id, event, action, "own_event", f"the event was caused by {app.bot_login}")
    not_routed = routing_interest(event, action)
    if not_routed is not None:
        return Dropped(delivery_id, event, action, "not_routed", not_routed)
    # The envelope's models are built only now: a rejected, pinged or dropped delivery is
    # answered without them (a cold ingress pays for pydantic's models only when it enqueues).
    from squadron.domain.event_trimming import build_envelope  # noqa: PLC0415
    from squadron.domain.events import EnvelopeError  # noqa: PLC0415

    try:
        envelope = build_envelope(
            event=event, delivery_id=delivery_id, payload=payload, received_at=received_at
        )
        envelope.to_message()  # within the queue's size, or refused here (never a crash later)
    except EnvelopeError as exc:
        return Rejected(400, "payload_invalid", str(exc))
    people = _unknown_people(envelope)
    if people is not None:
        return Rejected(400, "payload_invalid", f"{event} payload is not usable: {people}")
    return Accepted(envelope)


def _unknown_people(envelope: EventEnvelope) -> str | None:
    """A webhook's people are GitHub accounts (ids from 1); only the framework's own envelopes
    use id 0 for themselves."""
    actors = {
        "sender": envelope.sender,
        "assignee": envelope.assignee,
        "comment.author": envelope.comment.author if envelope.comment else None,
        "review.author": envelope.review.author if envelope.review else None,
    }
    for where, actor in actors.items():
        if actor is not None and actor.id < 1:
            return f"{where}.id: Input should be greater than 0"
    return None
