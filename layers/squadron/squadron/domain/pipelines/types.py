"""Value types of pipeline definitions: ids, stage references, bounded numbers and durations,
event names, templates and webhook addresses. Each refusal says which bound or rule it is."""

from __future__ import annotations

import difflib
import ipaddress
import re
from collections.abc import Callable
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator, BeforeValidator, WithJsonSchema

from squadron.domain.pipelines.limits import (
    MAX_ID_LENGTH,
    MAX_OUTPUT_NAME_LENGTH,
    MAX_STAGE_TIMEOUT,
    MIN_DURATION,
)
from squadron.domain.pipelines.templates import is_template, template_problem
from squadron.domain.repo_config.types import DURATION_PATTERN, format_duration, parse_duration
from squadron.domain.routed import ROUTED_EVENTS

#: A stage, branch or pipeline id, as the reference's stage ids.
ID_PATTERN = r"^[a-zA-Z][a-zA-Z0-9_-]*$"
_ID_RE = re.compile(ID_PATTERN)
#: Words a transition's ``then`` uses: a stage may not be called so (``then: escalate`` is never
#: a stage), nor ``current`` (``restart_from: current``) or ``complete``.
RESERVED_IDS = frozenset({"escalate", "fail", "cancel", "current", "complete"})
#: Targets of a transition that are no stage, as the reference's engine has them.
SPECIAL_TARGETS = frozenset({"__complete__", "__escalate__", "__next__"})


def _check_id(value: str) -> str:
    if len(value) > MAX_ID_LENGTH:
        raise ValueError(
            f"an id is at most {MAX_ID_LENGTH} characters (MAX_ID_LENGTH); this one has {len(value)}"
        )
    if not _ID_RE.fullmatch(value):
        raise ValueError(f"an id is a letter, then letters, digits, '_' and '-' (got {value!r})")
    return value


def _check_stage_id(value: str) -> str:
    _check_id(value)
    if value in RESERVED_IDS:
        raise ValueError(
            f"{value!r} is a reserved word of transitions ({', '.join(sorted(RESERVED_IDS))}): name the stage otherwise"
        )
    return value


_ID_SCHEMA = {"type": "string", "pattern": ID_PATTERN, "maxLength": MAX_ID_LENGTH}

#: A pipeline's name (a key of ``pipelines:``).
PipelineName = Annotated[str, AfterValidator(_check_id), WithJsonSchema(_ID_SCHEMA)]
#: A stage's or a parallel branch's id (unique in its pipeline).
StageId = Annotated[str, AfterValidator(_check_stage_id), WithJsonSchema(_ID_SCHEMA)]


def _check_target(value: str) -> str:
    return value if value in SPECIAL_TARGETS else _check_id(value)


#: Where a transition goes: a stage id of the same pipeline, or __complete__, __escalate__, __next__.
StageRef = Annotated[
    str,
    AfterValidator(_check_target),
    WithJsonSchema(
        {
            "type": "string",
            "maxLength": MAX_ID_LENGTH,
            "description": "a stage id, or __complete__, __escalate__, __next__",
        }
    ),
]


#: The name of an expected output: a key an agent's ``report_complete`` can give
#: (:data:`squadron.domain.commands.OutputKey`), read as ``stages.<id>.outputs.<name>``.
OUTPUT_NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_-]*$"
_OUTPUT_NAME_RE = re.compile(OUTPUT_NAME_PATTERN)


def _check_output_name(value: str) -> str:
    if len(value) > MAX_OUTPUT_NAME_LENGTH:
        raise ValueError(
            f"an output name is at most {MAX_OUTPUT_NAME_LENGTH} characters (MAX_OUTPUT_NAME_LENGTH); "
            f"this one has {len(value)}"
        )
    if not _OUTPUT_NAME_RE.fullmatch(value):
        shown = value if len(value) <= 40 else value[:40] + "..."
        raise ValueError(
            f"an output name is a letter, then letters, digits, '_' and '-' (got {shown!r}): "
            "the keys an agent can report"
        )
    return value


#: One name of a stage's ``expected_outputs``.
OutputName = Annotated[
    str,
    AfterValidator(_check_output_name),
    WithJsonSchema({"type": "string", "pattern": OUTPUT_NAME_PATTERN, "maxLength": MAX_OUTPUT_NAME_LENGTH}),
]


def unique_names(value: list[str]) -> list[str]:
    """``value`` without a name twice (else an error naming the first repeated)."""
    seen: set[str] = set()
    for name in value:
        if name in seen:
            raise ValueError(f"{name!r} is named twice")
        seen.add(name)
    return value


# --- bounded numbers and durations -------------------------------------------------------------


def _at_most(limit: int, name: str, what: str) -> Callable[[int], int]:
    def check(value: int) -> int:
        if value > limit:
            raise ValueError(f"{value} {what}, over the limit of {limit} ({name})")
        return value

    return check


def _within(low: int, low_name: str, high: int, high_name: str) -> Callable[[int], int]:
    def check(value: int) -> int:
        if value < low:
            raise ValueError(
                f"{format_duration(value)} is under the floor of {format_duration(low)} ({low_name})"
            )
        if value > high:
            raise ValueError(
                f"{format_duration(value)} is over the limit of {format_duration(high)} ({high_name})"
            )
        return value

    return check


def at_most(limit: int, name: str, what: str) -> AfterValidator:
    """Past ``limit``, an error naming the bound (``7 retries, over the limit of 5 (MAX_RETRIES)``)."""
    return AfterValidator(_at_most(limit, name, what))


def within(low: int, low_name: str, high: int, high_name: str) -> AfterValidator:
    """A duration in seconds from ``low`` to ``high``; outside, an error naming the bound."""
    return AfterValidator(_within(low, low_name, high, high_name))


def duration_schema(low: int, high: int) -> WithJsonSchema:
    return WithJsonSchema(
        {
            "anyOf": [
                {"type": "integer", "minimum": low, "maximum": high, "description": "seconds"},
                {"type": "string", "pattern": DURATION_PATTERN, "description": "e.g. 30s, 5m, 2h, 1d"},
            ]
        }
    )


#: A stage's timeout, a delay, a timeout's extension: 1s to 7d, written ``30s``, ``5m``, ``2h``,
#: ``1d`` (or ``1h30m``, or a number of seconds).
StageDuration = Annotated[
    int,
    BeforeValidator(parse_duration),
    within(MIN_DURATION, "MIN_DURATION", MAX_STAGE_TIMEOUT, "MAX_STAGE_TIMEOUT"),
    duration_schema(MIN_DURATION, MAX_STAGE_TIMEOUT),
]


# --- events --------------------------------------------------------------------------------------

#: The events a trigger or a reactive handler may name: those the App subscribes to and the
#: router receives (``issues.labeled``, ``pull_request.synchronize``, ``status``...).
EVENT_NAMES: frozenset[str] = frozenset(
    event if actions is None else f"{event}.{action}"
    for event, actions in ROUTED_EVENTS.items()
    for action in (sorted(actions) if actions is not None else [None])
)


def _check_event(value: str) -> str:
    if value in EVENT_NAMES:
        return value
    close = difflib.get_close_matches(value, sorted(EVENT_NAMES), n=1, cutoff=0.7) if len(value) <= 64 else []
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ValueError(
        f"unknown event {value!r}{hint}: only the events the App receives can start or steer a pipeline "
        "(listed in docs/pipelines.md)"
    )


EventName = Annotated[
    str, AfterValidator(_check_event), WithJsonSchema({"type": "string", "enum": sorted(EVENT_NAMES)})
]


# --- templates -----------------------------------------------------------------------------------


def _check_template(value: str) -> str:
    problem = template_problem(value)
    if problem is not None:
        raise ValueError(f"template {problem}")
    return value


#: A string that may hold ``{{ expression }}``\ s (checked: see squadron.domain.pipelines.templates).
Template = Annotated[str, AfterValidator(_check_template)]


def _check_expression_template(value: str) -> str:
    if not (value.strip().startswith("{{") and value.strip().endswith("}}")) or value.count("{{") != 1:
        raise ValueError(f"a condition written as a string is one {{{{ expression }}}} (got {value!r})")
    return _check_template(value)


#: A condition written as one ``{{ expression }}`` (true or false when it runs).
ExpressionTemplate = Annotated[str, AfterValidator(_check_expression_template)]


def _check_bare_expression(value: str) -> str:
    if is_template(value):
        raise ValueError("expr is a bare expression, without {{ }} (e.g. context.env == 'prod')")
    _check_template("{{ " + value + " }}")
    return value


#: The reference's ``expr:`` condition: an expression without the braces.
BareExpression = Annotated[str, AfterValidator(_check_bare_expression)]


# --- webhook addresses ---------------------------------------------------------------------------

_NUMERIC_HOST = re.compile(r"(?:(?:0x[0-9a-f]*|[0-9]+)\.?){1,4}")
_BLOCKED_HOSTS = frozenset({"localhost", "metadata.google.internal", "metadata", "instance-data"})


def _check_webhook_url(value: str) -> str:
    """An https address whose host is written out and is no private, loopback, link-local or
    metadata address (the runtime check of where the name resolves is the executor's)."""
    try:
        parts = urlsplit(value)
    except ValueError as exc:
        raise ValueError(f"not a URL: {exc}") from exc
    if parts.scheme != "https":
        raise ValueError(f"a webhook address is https:// (got {value!r})")
    host = parts.hostname or ""
    if not host or is_template(parts.netloc):
        raise ValueError("a webhook address names its host literally (templates only after the host)")
    if parts.username is not None or parts.password is not None:
        raise ValueError("a webhook address carries no credentials (user:password@)")
    lowered = host.lower().rstrip(".")
    if lowered in _BLOCKED_HOSTS or lowered.endswith((".localhost", ".internal", ".local")):
        raise ValueError(f"a webhook may not call {host!r}: an internal name")
    try:
        address = ipaddress.ip_address(lowered.strip("[]"))
    except ValueError:
        if _NUMERIC_HOST.fullmatch(lowered):
            # 2852039166, 0xa9.0xfe.0xa9.0xfe, 0251.0376...: IPv4 in a form clients read differently
            raise ValueError(
                f"a webhook address writes an IP address in dotted decimal (got {host!r})"
            ) from None
        return _check_template(value)
    mapped = getattr(address, "ipv4_mapped", None)
    if not address.is_global or address.is_multicast or (mapped is not None and not mapped.is_global):
        raise ValueError(
            f"a webhook may not call {host!r}: a private, loopback, link-local or metadata address"
        )
    return _check_template(value)


WebhookUrl = Annotated[
    str,
    AfterValidator(_check_webhook_url),
    WithJsonSchema({"type": "string", "pattern": "^https://", "maxLength": 2000}),
]
