"""What the task's model gateway lets through, and what a model call used — pure.

The gateway (:mod:`squadron.adapters.model_gateway`) stands between the Copilot CLI and the
role's provider: it holds the key, the CLI holds a launch-scoped token. Decided here: which of
the provider's paths a call may take (the model endpoints of its type, nothing else), whether the
call names one of the role's models, the error the model sees when a call is refused, and the
tokens a response reports (a JSON body, or a stream of server-sent events read as it passes).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

#: "copilot": GitHub Copilot's API (a role with no BYOK provider), reached through the Copilot SDK's
#: request handler (:class:`squadron.adapters.copilot.ThroughGateway`).
ProviderType = Literal["openai", "azure", "anthropic", "copilot"]

#: The model endpoints of each provider type, relative to the configured base URL.
_PATHS: dict[str, re.Pattern[str]] = {
    "openai": re.compile(r"(?:chat/completions|responses)"),
    "azure": re.compile(
        r"(?:openai/deployments/(?P<deployment>[A-Za-z0-9._-]{1,100})/)?(?:chat/completions|responses)"
    ),
    "anthropic": re.compile(r"(?:v1/)?messages"),
    "copilot": re.compile(r"(?:chat/completions|responses|v1/messages)"),
}
#: What may be read (GET) through the gateway, per provider type: Copilot's model catalog (the CLI
#: reads each model's endpoints and limits from it; it costs nothing and names no model).
_READS: dict[str, frozenset[str]] = {"copilot": frozenset({"models"})}
#: The one GitHub API call the Copilot CLI needs its token for: it checks the token with it when a
#: session starts (every other GitHub call it would make is refused: the framework does those).
GITHUB_READS = frozenset({"copilot_internal/user"})
#: The only query parameter passed on (Azure's API version); every other one is dropped.
KEPT_QUERY = frozenset({"api-version"})


@dataclass(frozen=True)
class Refusal:
    """A call the gateway does not forward: the HTTP status and what the model is told."""

    status: int
    code: str
    message: str


def route(provider_type: str, path: str) -> tuple[str, str | None] | Refusal:
    """The path below the base URL a call may take, and the deployment it names (Azure), or why not."""
    pattern = _PATHS.get(provider_type)
    suffix = path.lstrip("/")
    if ".." in suffix or "//" in suffix:
        return Refusal(
            403, "path_refused", f"the model gateway forwards the model endpoints only, not /{suffix}"
        )
    match = pattern.fullmatch(suffix) if pattern is not None else None
    if match is None:
        return Refusal(
            403, "path_refused", f"the model gateway forwards the model endpoints only, not /{suffix}"
        )
    return suffix, match.groupdict().get("deployment")


def readable(provider_type: str, path: str, reads: frozenset[str] | None = None) -> str | Refusal:
    """The path below the base URL a GET may read (the provider type's catalog, or ``reads``), or why not."""
    suffix = path.lstrip("/")
    allowed = _READS.get(provider_type, frozenset()) if reads is None else reads
    if suffix not in allowed:
        return Refusal(
            403, "path_refused", f"the model gateway forwards the model endpoints only, not /{suffix}"
        )
    return suffix


def requested_model(body: bytes, deployment: str | None, models: frozenset[str]) -> tuple[str, Any] | Refusal:
    """The model a call names (and its parsed body), if it is one of the role's ``models``."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return Refusal(400, "invalid_request", "the model gateway takes a JSON request body")
    if not isinstance(parsed, dict):
        return Refusal(400, "invalid_request", "the model gateway takes a JSON object")
    model = parsed.get("model", deployment)
    if deployment is not None and model != deployment:
        model = None  # an Azure deployment that is not the model the body names: neither counts
    if not isinstance(model, str) or model not in models:
        shown = str(model)[:100]
        return Refusal(
            403, "model_refused", f"this agent may call {', '.join(sorted(models))} only, not {shown!r}"
        )
    return model, parsed


def with_usage_reported(parsed: dict[str, Any], provider_type: str) -> dict[str, Any]:
    """The request, asking a streamed OpenAI chat completion to report its usage (what is counted)."""
    if provider_type in ("openai", "azure") and parsed.get("stream") and "messages" in parsed:
        options = parsed.get("stream_options")
        return {
            **parsed,
            "stream_options": {**(options if isinstance(options, dict) else {}), "include_usage": True},
        }
    return parsed


def error_body(provider_type: str, refusal: Refusal) -> bytes:
    """A refusal in the provider's own error shape, so the CLI shows the model its message."""
    message = f"squadron model gateway: {refusal.message}"
    if provider_type == "anthropic":
        shaped: dict[str, Any] = {"type": "error", "error": {"type": refusal.code, "message": message}}
    else:
        shaped = {"error": {"message": message, "type": refusal.code, "code": refusal.code}}
    return json.dumps(shaped).encode()


@dataclass(frozen=True)
class Tokens:
    input_tokens: int = 0
    output_tokens: int = 0

    def merged(self, other: Tokens) -> Tokens:
        """The larger of each count (a stream repeats its running totals; Anthropic splits them)."""
        return Tokens(
            max(self.input_tokens, other.input_tokens), max(self.output_tokens, other.output_tokens)
        )


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def tokens_of(payload: Any) -> Tokens | None:
    """The usage a response body or one streamed event reports, in any of the providers' shapes."""
    if not isinstance(payload, dict):
        return None
    usage = payload.get("usage")
    for nested in ("response", "message"):  # Responses API's completed event; Anthropic's message_start
        inner = payload.get(nested)
        if usage is None and isinstance(inner, dict):
            usage = inner.get("usage")
    if not isinstance(usage, dict):
        return None
    read = (
        _count(usage.get("prompt_tokens"))
        + _count(usage.get("input_tokens"))
        + _count(usage.get("cache_creation_input_tokens"))
        + _count(usage.get("cache_read_input_tokens"))
    )
    written = _count(usage.get("completion_tokens")) + _count(usage.get("output_tokens"))
    return Tokens(read, written)


def event_tokens(line: bytes) -> Tokens | None:
    """The usage one line of a server-sent event stream reports (``data: {...}``), if any."""
    if not line.startswith(b"data:"):
        return None
    try:
        return tokens_of(json.loads(line[5:].strip()))
    except ValueError:
        return None


def estimate(request_bytes: int, response_bytes: int) -> Tokens:
    """What a call that reported no usage is counted as: a token per four bytes each way (never free)."""
    return Tokens(request_bytes // 4 + 1, response_bytes // 4 + 1)


def json_bytes(parsed: Any) -> bytes:
    return json.dumps(parsed, separators=(",", ":")).encode()


def parsed(data: bytes) -> Any:
    """A JSON body, or None when it is not one."""
    try:
        return json.loads(data)
    except ValueError:
        return None


#: Model calls a task may make per turn its breakers allow (the CLI's own calls besides the turns).
CALLS_PER_TURN = 2
#: Model calls after a breaker tripped: the summary the host asks for, and its retries.
CALLS_AFTER_TRIP = 3


def budget_refusal(
    *,
    calls: int,
    max_turns: int,
    calls_since_trip: int | None,
    spent_usd: float,
    budget_usd: float | None,
) -> str | None:
    """Why the task's next model call (its ``calls``-th) is refused, or None to let it through.

    Past the breakers' turns (a shell calling the gateway makes no turn the CLI counts), past a
    tripped breaker's summary, or with the issue's budget spent. Never fails open: a budget that
    cannot be compared refuses.
    """
    if calls > max_turns * CALLS_PER_TURN:
        return (
            f"this task made {calls - 1} model calls, the most its {max_turns} turns allow; "
            "no more model calls in this task"
        )
    if calls_since_trip is not None and calls_since_trip >= CALLS_AFTER_TRIP:
        return "a circuit breaker stopped this task and its summary was asked for; no more model calls"
    if budget_usd is not None and not spent_usd < budget_usd:
        return f"the issue's budget is spent (${spent_usd:.4f} of ${budget_usd:.2f}); no more model calls"
    return None
