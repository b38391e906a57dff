"""How an agent's task ends, as tables: the host's decisions without the Copilot CLI."""

from __future__ import annotations

import pytest

from squadron.domain.lifecycle import (
    CHECK_NEWS,
    END,
    SUMMARIZE,
    AfterTurn,
    Ending,
    Outcome,
    TaskOutcome,
    after_turn,
    poll_times,
    reported,
    task_outcome,
)

AFTER_TURN: list[tuple[str, Ending, bool, str | None, AfterTurn]] = [
    # (id, the model's ending, lease lost, breaker tripped, what comes next)
    ("a turn that ended with nothing looks for news", None, False, None, AfterTurn(CHECK_NEWS, None, "why")),
    ("a completed turn looks for news", "complete", False, None, AfterTurn(CHECK_NEWS, "complete", "why")),
    ("a blocked agent ends (it sleeps)", "sleep", False, None, AfterTurn(END, "sleep", "why")),
    ("an agent asking for humans ends", "escalate", False, None, AfterTurn(END, "escalate", "why")),
    ("a lost lease ends at once", None, True, None, AfterTurn(END, None, "why")),
    ("a lost lease ends even with a tripped breaker", None, True, "turns", AfterTurn(END, None, "why")),
    (
        "a tripped breaker asks for a summary and escalates",
        None,
        False,
        "turns",
        AfterTurn(SUMMARIZE, "escalate", "turns reached 20 of 20"),
    ),
    (
        "a tripped breaker after a report still escalates",
        "complete",
        False,
        "tool_calls",
        AfterTurn(SUMMARIZE, "escalate", "turns reached 20 of 20"),
    ),
    (
        "a tripped breaker while going to sleep: it sleeps",
        "sleep",
        False,
        "turns",
        AfterTurn(END, "sleep", "why"),
    ),
    (
        "a tripped breaker while escalating: no second summary",
        "escalate",
        False,
        "turns",
        AfterTurn(END, "escalate", "why"),
    ),
]


@pytest.mark.parametrize(
    ("ending", "lease_lost", "tripped", "expected"),
    [c[1:] for c in AFTER_TURN],
    ids=[c[0] for c in AFTER_TURN],
)
def test_after_the_models_turn(
    ending: Ending, lease_lost: bool, tripped: str | None, expected: AfterTurn
) -> None:
    got = after_turn(
        ending=ending,
        reason="why",
        lease_lost=lease_lost,
        tripped=tripped,
        trip_reason="turns reached 20 of 20",
    )
    assert got == expected


SPENT = "the issue's budget is spent ($1.0200 of $1.00); no more model calls"

AFTER_A_REFUSAL: list[tuple[str, Ending, bool, str | None, AfterTurn]] = [
    # (id, the model's ending, lease lost, breaker tripped, what comes next) once the model
    # gateway refused a call for good: no summary, no news (each would be a model call)
    (
        "a working agent is handed to humans with the refusal",
        None,
        False,
        None,
        AfterTurn(END, "escalate", SPENT),
    ),
    (
        "after a report too (its last reply was refused)",
        "complete",
        False,
        None,
        AfterTurn(END, "escalate", SPENT),
    ),
    ("a tripped breaker asks no summary", None, False, "turns", AfterTurn(END, "escalate", SPENT)),
    ("an agent going to sleep sleeps", "sleep", False, None, AfterTurn(END, "sleep", "why")),
    ("an agent escalating keeps its reason", "escalate", False, None, AfterTurn(END, "escalate", "why")),
    ("a lost lease ends as one", None, True, None, AfterTurn(END, None, "why")),
]


@pytest.mark.parametrize(
    ("ending", "lease_lost", "tripped", "expected"),
    [c[1:] for c in AFTER_A_REFUSAL],
    ids=[c[0] for c in AFTER_A_REFUSAL],
)
def test_after_a_model_call_refused_for_good(
    ending: Ending, lease_lost: bool, tripped: str | None, expected: AfterTurn
) -> None:
    got = after_turn(
        ending=ending,
        reason="why",
        lease_lost=lease_lost,
        tripped=tripped,
        trip_reason="turns reached 20 of 20",
        refused=SPENT,
    )
    assert got == expected


REFUSED_OUTCOMES: list[tuple[str, Ending, bool, TaskOutcome]] = [
    # (id, the model's ending, lease lost, how the task ended) when the CLI gave the session up
    # on the refused call (no turn end to decide on)
    (
        "working: escalated with the refusal, saved",
        None,
        False,
        TaskOutcome("escalated", SPENT, f"WIP: handed to humans: {SPENT}"),
    ),
    (
        "completed: escalated all the same",
        "complete",
        False,
        TaskOutcome("escalated", SPENT, f"WIP: handed to humans: {SPENT}"),
    ),
    ("asleep: sleeps", "sleep", False, TaskOutcome("sleeping", "why", "WIP: why")),
    ("a lost lease: superseded", None, True, TaskOutcome("superseded", "the lease was lost while working")),
]


@pytest.mark.parametrize(
    ("ending", "lease_lost", "expected"),
    [c[1:] for c in REFUSED_OUTCOMES],
    ids=[c[0] for c in REFUSED_OUTCOMES],
)
def test_how_a_task_with_a_refused_model_call_ended(
    ending: Ending, lease_lost: bool, expected: TaskOutcome
) -> None:
    assert task_outcome(ending=ending, reason="why", lease_lost=lease_lost, refused=SPENT) == expected


def test_a_trip_without_a_reason_still_says_what_stopped_it() -> None:
    got = after_turn(ending=None, reason="", lease_lost=False, tripped="turns", trip_reason="")
    assert got == AfterTurn(SUMMARIZE, "escalate", "circuit breaker")


OUTCOMES: list[tuple[str, Ending, bool, TaskOutcome]] = [
    (
        "asleep: the work is saved first",
        "sleep",
        False,
        TaskOutcome("sleeping", "blocked by #12", "WIP: blocked by #12"),
    ),
    (
        "escalated: saved for the humans",
        "escalate",
        False,
        TaskOutcome("escalated", "blocked by #12", "WIP: handed to humans: blocked by #12"),
    ),
    ("completed: idle with its report", "complete", False, TaskOutcome("idle", "blocked by #12")),
    ("nothing said: idle, and says so", None, False, TaskOutcome("idle", "the turn ended without a report")),
    (
        "a lost lease: superseded, nothing saved",
        "escalate",
        True,
        TaskOutcome("superseded", "the lease was lost while working"),
    ),
]


@pytest.mark.parametrize(
    ("ending", "lease_lost", "expected"), [c[1:] for c in OUTCOMES], ids=[c[0] for c in OUTCOMES]
)
def test_how_the_task_ended(ending: Ending, lease_lost: bool, expected: TaskOutcome) -> None:
    assert task_outcome(ending=ending, reason="blocked by #12", lease_lost=lease_lost) == expected


@pytest.mark.parametrize(
    ("outcome", "told"),
    [
        (None, "failed"),  # the host crashed: the reconciler relaunches it
        ("superseded", None),  # its successor speaks for the agent
        ("busy", None),
        ("sleeping", "sleeping"),
        ("escalated", "escalated"),
        ("idle", "idle"),
    ],
)
def test_what_the_router_is_told(outcome: Outcome | None, told: str | None) -> None:
    assert reported(outcome) == told


@pytest.mark.parametrize(
    ("linger", "times"),
    [
        (0, [0.0]),
        (1, [0.0, 0.5, 1.0]),
        (30, [0.0, 0.5, 1.5, 3.5, 7.5, 15.5, 23.5, 30.0]),
    ],
)
def test_a_lingering_task_reads_its_inbox_less_and_less_often(linger: float, times: list[float]) -> None:
    assert poll_times(linger) == times


def test_an_idle_minute_costs_a_few_reads_not_sixty() -> None:
    assert len(poll_times(60)) == 12  # 0, .5, 1.5, 3.5, 7.5, then every 8 s to 60
