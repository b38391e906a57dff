"""Circuit breakers (AD-018) — pure. The agent host consults them; the model never can.

Five limits per agent task: tool calls, conversation turns and iterations
(test-runner invocations, a proxy for fix cycles) counted before each tool
call; active wall-clock time checked on a timer; sleep time checked by the
reconciler. At ``warning_ratio`` of a limit the model is warned once, to wrap
up; past a limit the breaker trips and stays tripped: every further tool call
is denied with the reason, the host asks the model for a summary, pushes the
work and escalates the agent. A breaker never fails open: a limit that cannot
be evaluated counts as exceeded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Protocol


class Limits(Protocol):
    """The limits (``squadron.domain.repo_config.models.BreakerLimits`` satisfies it)."""

    @property
    def max_iterations(self) -> int: ...
    @property
    def max_tool_calls(self) -> int: ...
    @property
    def max_turns(self) -> int: ...
    @property
    def max_active_duration(self) -> int: ...
    @property
    def max_sleep_duration(self) -> int: ...
    @property
    def warning_ratio(self) -> float: ...


class Limit(StrEnum):
    TOOL_CALLS = "tool_calls"
    TURNS = "turns"
    ITERATIONS = "iterations"
    ACTIVE_DURATION = "active_duration"
    SLEEP_DURATION = "sleep_duration"


#: Shell commands that run a test suite: each one is an iteration of a fix cycle.
TEST_RUNNER = re.compile(
    r"(?:^|[;&|(])\s*(?:\w+=\S*\s+)*"  # a command position, after VAR=value assignments
    r"(?:python3?\s+-m\s+|npx\s+|uv\s+run\s+|poetry\s+run\s+)?"
    r"(?:pytest|tox|nox|npm\s+(?:run\s+)?test|yarn\s+test|pnpm\s+test|jest|vitest|go\s+test|cargo\s+test|"
    r"mvn\s+(?:-\S+\s+)*test|gradle\w*\s+test|make\s+(?:test|check)|unittest|rspec|phpunit|dotnet\s+test)"
    r"(?=\s|$|[;&|)])"
)
SHELL_TOOLS = frozenset({"bash", "shell", "powershell"})


@dataclass(frozen=True)
class Usage:
    """What one task has used so far, and what it was warned about."""

    tool_calls: int = 0
    turns: int = 0
    iterations: int = 0
    warned: frozenset[Limit] = frozenset()
    tripped: Limit | None = None
    trip_reason: str | None = None


@dataclass(frozen=True)
class Decision:
    allow: bool
    #: For the model: a warning to add as context (allowed) or why it was denied.
    message: str | None = None
    #: Set when this decision tripped the breaker (the host escalates).
    tripped_now: Limit | None = None


@dataclass(frozen=True)
class Assessment:
    usage: Usage
    decision: Decision
    notes: tuple[str, ...] = field(default=())


def is_iteration(tool_name: str, command: str | None) -> bool:
    return tool_name in SHELL_TOOLS and bool(command) and TEST_RUNNER.search(command or "") is not None


def _maximum(limits: Limits, limit: Limit) -> int:
    return {
        Limit.TOOL_CALLS: limits.max_tool_calls,
        Limit.TURNS: limits.max_turns,
        Limit.ITERATIONS: limits.max_iterations,
        Limit.ACTIVE_DURATION: limits.max_active_duration,
        Limit.SLEEP_DURATION: limits.max_sleep_duration,
    }[limit]


def _trip(usage: Usage, limit: Limit, used: float, maximum: int) -> Assessment:
    reason = (
        f"circuit breaker tripped: {limit} reached {used:g} of {maximum}. Stop using tools; "
        "reply with a summary of what is done, what is left and what a human should decide."
    )
    tripped = replace(usage, tripped=limit, trip_reason=reason)
    return Assessment(tripped, Decision(False, reason, tripped_now=limit))


def _with_warnings(usage: Usage, limits: Limits, used: dict[Limit, float]) -> Assessment:
    warnings: list[str] = []
    warned = set(usage.warned)
    for limit, value in used.items():
        maximum = _maximum(limits, limit)
        if limit not in warned and value >= limits.warning_ratio * maximum:
            warned.add(limit)
            warnings.append(
                f"{limit} is at {value:g} of {maximum} ({value / maximum:.0%}); wrap up: commit your work and "
                "report complete or blocked before the limit stops you."
            )
    updated = replace(usage, warned=frozenset(warned))
    return Assessment(updated, Decision(True, "\n".join(warnings) or None))


def before_tool_call(
    usage: Usage, limits: Limits, *, tool_name: str, command: str | None = None, elapsed: timedelta
) -> Assessment:
    """Count the call; allow it (maybe with a warning) or deny it (tripping the breaker)."""
    if usage.tripped is not None:
        return Assessment(usage, Decision(False, usage.trip_reason))
    counted = replace(
        usage,
        tool_calls=usage.tool_calls + 1,
        iterations=usage.iterations + (1 if is_iteration(tool_name, command) else 0),
    )
    used: dict[Limit, float] = {
        Limit.TOOL_CALLS: counted.tool_calls,
        Limit.ITERATIONS: counted.iterations,
        Limit.TURNS: counted.turns,
        Limit.ACTIVE_DURATION: elapsed.total_seconds(),
    }
    for limit, value in used.items():
        maximum = _maximum(limits, limit)
        if value > maximum:
            return _trip(usage, limit, value, maximum)
    return _with_warnings(counted, limits, used)


def on_turn(usage: Usage, limits: Limits) -> Assessment:
    """Count one conversation turn (a model response); trip past the limit."""
    if usage.tripped is not None:
        return Assessment(usage, Decision(False, usage.trip_reason))
    counted = replace(usage, turns=usage.turns + 1)
    if counted.turns > limits.max_turns:
        return _trip(usage, Limit.TURNS, counted.turns, limits.max_turns)
    return _with_warnings(counted, limits, {Limit.TURNS: counted.turns})


def on_timer(usage: Usage, limits: Limits, *, elapsed: timedelta) -> Assessment:
    """The host's timer: trip when the task has been active too long."""
    if usage.tripped is not None:
        return Assessment(usage, Decision(False, usage.trip_reason))
    seconds = elapsed.total_seconds()
    if seconds > limits.max_active_duration:
        return _trip(usage, Limit.ACTIVE_DURATION, seconds, limits.max_active_duration)
    return _with_warnings(usage, limits, {Limit.ACTIVE_DURATION: seconds})


def sleep_overdue(asleep_since: datetime | None, now: datetime, limits: Limits) -> str | None:
    """The reconciler's check: why a sleeping agent must be escalated, or None.

    An agent asleep without a known start time is overdue (never fail open).
    """
    if asleep_since is None:
        return "asleep since an unknown time"
    slept = (now - asleep_since).total_seconds()
    if slept > limits.max_sleep_duration:
        return f"asleep for {slept:g} s, over max_sleep_duration {limits.max_sleep_duration} s"
    return None
