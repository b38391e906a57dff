"""Circuit breakers: counting, one warning per limit at 80%, a trip that stays tripped."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from squadron.domain.breakers import (
    Limit,
    Usage,
    before_tool_call,
    is_iteration,
    on_timer,
    on_turn,
    sleep_overdue,
)
from squadron.domain.repo_config.models import BreakerLimits

LIMITS = BreakerLimits(max_iterations=5, max_tool_calls=10, max_turns=5, max_active_duration=600)
NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
SOON = timedelta(seconds=1)


def _calls(n: int, *, tool: str = "view", command: str | None = None) -> tuple[Usage, list[str | None], bool]:
    usage = Usage()
    messages: list[str | None] = []
    allowed = True
    for _ in range(n):
        assessment = before_tool_call(usage, LIMITS, tool_name=tool, command=command, elapsed=SOON)
        usage = assessment.usage
        messages.append(assessment.decision.message)
        allowed = assessment.decision.allow
    return usage, messages, allowed


@pytest.mark.parametrize(
    ("calls", "allowed", "warnings", "tripped"),
    [(7, True, 0, None), (8, True, 1, None), (10, True, 1, None), (11, False, 1, Limit.TOOL_CALLS)],
    ids=["below 80%", "warned at 80%", "at the limit", "past the limit"],
)
def test_tool_calls(calls: int, allowed: bool, warnings: int, tripped: Limit | None) -> None:
    usage, messages, last_allowed = _calls(calls)
    assert last_allowed is allowed
    assert sum(1 for m in messages if m and "wrap up" in m) == warnings
    assert usage.tripped is tripped


def test_a_trip_stays_tripped_and_denies_everything() -> None:
    usage, messages, _ = _calls(11)
    assert messages[-1] is not None
    assert "circuit breaker tripped: tool_calls reached 11 of 10" in messages[-1]
    again = before_tool_call(usage, LIMITS, tool_name="view", elapsed=SOON)
    assert not again.decision.allow
    assert again.decision.tripped_now is None  # tripped once; the host escalates once
    assert not on_turn(usage, LIMITS).decision.allow
    assert not on_timer(usage, LIMITS, elapsed=SOON).decision.allow


@pytest.mark.parametrize(
    ("tool", "command", "iteration"),
    [
        ("bash", "pytest -q tests", True),
        ("bash", "cd app && python -m pytest", True),
        ("bash", "npm test", True),
        ("bash", "npm run test -- --watch=false", True),
        ("bash", "go test ./...", True),
        ("bash", "make test", True),
        ("bash", "cargo test --release", True),
        ("bash", "git status", False),
        ("bash", "cat pytest.ini", False),
        ("bash", "echo run pytest later", False),
        ("bash", "CI=1 npx jest --ci", True),
        ("view", "pytest", False),
        ("bash", None, False),
    ],
)
def test_iterations_are_test_runs(tool: str, command: str | None, iteration: bool) -> None:
    assert is_iteration(tool, command) is iteration


def test_the_sixth_test_run_trips() -> None:
    usage, _, allowed = _calls(5, tool="bash", command="pytest")
    assert allowed and usage.iterations == 5
    denied = before_tool_call(usage, LIMITS, tool_name="bash", command="pytest", elapsed=SOON)
    assert denied.decision.tripped_now is Limit.ITERATIONS


@pytest.mark.parametrize(
    ("turns", "allowed", "warned"), [(3, True, False), (4, True, True), (5, True, True), (6, False, True)]
)
def test_turns(turns: int, allowed: bool, warned: bool) -> None:
    usage = Usage()
    decision = None
    for _ in range(turns):
        assessment = on_turn(usage, LIMITS)
        usage, decision = assessment.usage, assessment.decision
    assert decision is not None
    assert decision.allow is allowed
    assert (Limit.TURNS in usage.warned) is warned


@pytest.mark.parametrize(
    ("seconds", "allowed", "message"),
    [
        (100, True, None),
        (480, True, "active_duration is at 480 of 600 (80%)"),
        (601, False, "reached 601 of 600"),
    ],
)
def test_active_duration(seconds: int, allowed: bool, message: str | None) -> None:
    decision = on_timer(Usage(), LIMITS, elapsed=timedelta(seconds=seconds)).decision
    assert decision.allow is allowed
    if message is None:
        assert decision.message is None
    else:
        assert decision.message is not None
        assert message in decision.message


def test_a_tool_call_past_the_active_duration_is_denied() -> None:
    decision = before_tool_call(Usage(), LIMITS, tool_name="view", elapsed=timedelta(hours=1)).decision
    assert decision.tripped_now is Limit.ACTIVE_DURATION


@pytest.mark.parametrize(
    ("asleep_since", "overdue"),
    [(NOW - timedelta(hours=1), False), (NOW - timedelta(hours=25), True), (None, True)],
    ids=["an hour", "over a day", "unknown: never fails open"],
)
def test_sleep_duration(asleep_since: datetime | None, overdue: bool) -> None:
    assert (sleep_overdue(asleep_since, NOW, BreakerLimits()) is not None) is overdue


def test_warnings_come_once_per_limit() -> None:
    _, messages, _ = _calls(10)
    assert [i for i, m in enumerate(messages) if m] == [7]
