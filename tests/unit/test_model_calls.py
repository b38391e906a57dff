"""What the model gateway lets through and what a model call used (squadron.domain.model_calls)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from squadron.domain.model_calls import (
    CALLS_AFTER_TRIP,
    CALLS_PER_TURN,
    Refusal,
    Tokens,
    budget_refusal,
    event_tokens,
    route,
    tokens_of,
)


@pytest.mark.parametrize(
    ("provider_type", "path", "allowed"),
    [
        ("openai", "/chat/completions", True),
        ("openai", "/responses", True),
        ("openai", "/models", False),
        ("openai", "/files", False),
        ("openai", "/chat/completions/../files", False),
        ("openai", "//evil.example/chat/completions", False),
        ("anthropic", "/v1/messages", True),
        ("anthropic", "/messages", True),
        ("anthropic", "/v1/messages/batches", False),
        ("azure", "/openai/deployments/gpt-5/chat/completions", True),
        ("azure", "/chat/completions", True),
        ("azure", "/openai/deployments/gpt-5/embeddings", False),
        ("bedrock", "/chat/completions", False),
    ],
)
def test_only_the_model_endpoints_of_the_providers_type_are_routed(
    provider_type: str, path: str, allowed: bool
) -> None:
    assert (not isinstance(route(provider_type, path), Refusal)) is allowed


@pytest.mark.parametrize(
    ("payload", "tokens"),
    [
        ({"usage": {"prompt_tokens": 10, "completion_tokens": 3}}, Tokens(10, 3)),
        (
            {"type": "response.completed", "response": {"usage": {"input_tokens": 8, "output_tokens": 2}}},
            Tokens(8, 2),
        ),
        (
            {"message": {"usage": {"input_tokens": 5, "cache_read_input_tokens": 100, "output_tokens": 1}}},
            Tokens(105, 1),
        ),
        ({"usage": {"output_tokens": 40}}, Tokens(0, 40)),
        ({"usage": {"prompt_tokens": -5, "completion_tokens": True}}, Tokens(0, 0)),  # never negative
        ({"choices": []}, None),
        ([1, 2], None),
    ],
)
def test_usage_is_read_from_every_providers_shape(payload: Any, tokens: Tokens | None) -> None:
    assert tokens_of(payload) == tokens
    assert event_tokens(b"data: " + json.dumps(payload).encode()) == tokens
    assert event_tokens(b"event: " + json.dumps(payload).encode()) is None


def test_a_streams_running_totals_are_merged_not_added() -> None:
    assert Tokens(40, 1).merged(Tokens(0, 25)).merged(Tokens(0, 30)) == Tokens(40, 30)


@pytest.mark.parametrize(
    ("calls", "since_trip", "spent", "budget", "refused"),
    [
        (1, None, 0.0, None, None),
        (10 * CALLS_PER_TURN, None, 0.0, None, None),
        (10 * CALLS_PER_TURN + 1, None, 0.0, None, "model calls"),  # a shell looping on the gateway
        (5, 0, 0.0, None, None),  # the summary after a trip
        (5, CALLS_AFTER_TRIP - 1, 0.0, None, None),
        (5, CALLS_AFTER_TRIP, 0.0, None, "circuit breaker"),
        (5, None, 1.99, 2.0, None),
        (5, None, 2.0, 2.0, "budget is spent"),
        (5, None, float("nan"), 2.0, "budget is spent"),  # never fails open
    ],
)
def test_the_budget_refuses_past_the_turns_the_trip_and_the_issues_budget(
    calls: int, since_trip: int | None, spent: float, budget: float | None, refused: str | None
) -> None:
    answer = budget_refusal(
        calls=calls, max_turns=10, calls_since_trip=since_trip, spent_usd=spent, budget_usd=budget
    )
    assert (answer is None) if refused is None else (answer is not None and refused in answer)
