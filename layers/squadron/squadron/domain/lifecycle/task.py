"""How an agent's task ends, decided in the pure core (the agent host only carries it out).

When the model's turn ends the host asks :func:`after_turn` what comes next: hand over (the
lease is gone), ask the model for a summary for the humans (a breaker tripped), look for news
that came while it worked (the only step that needs I/O: :data:`CHECK_NEWS`), or end. When the
session is over, :func:`task_outcome` says how the task ended, what to save of the work first,
and :func:`reported` what the router is told (its ``task_ended`` command); the router then
idles, sleeps or escalates the agent with :mod:`squadron.domain.lifecycle.transitions`
(:mod:`squadron.domain.routing.commands`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

#: What the model said it is doing with its turn (its ending tool), None while it works.
Ending = Literal["sleep", "escalate", "complete"] | None
#: How the task ended (the host's result); superseded and busy tell the router nothing.
Outcome = Literal["superseded", "busy", "sleeping", "escalated", "idle"]

#: What the router is told of a task's end (the ``outcome`` of its ``task_ended`` command).
Reported = Literal["idle", "sleeping", "escalated", "failed"]

NextStep = Literal["end", "summarize", "check_news"]
END: Final = "end"
SUMMARIZE: Final = "summarize"
CHECK_NEWS: Final = "check_news"


@dataclass(frozen=True)
class AfterTurn:
    """What comes after the model's turn, and the ending and reason it leaves."""

    step: NextStep
    ending: Ending
    reason: str


def after_turn(
    *,
    ending: Ending,
    reason: str,
    lease_lost: bool,
    tripped: str | None,
    trip_reason: str,
    refused: str | None = None,
) -> AfterTurn:
    """The next step once the model's turn ended.

    A lost lease ends at once (another task holds the agent). A model call the task's model
    gateway refused for good (``refused``: the issue's budget spent, the calls the breakers allow
    made) ends in an escalation with that reason, unless the model was already asleep or
    escalating: no summary is asked (it would be a model call too) and no news looked for. A breaker that tripped while the
    model was not already asleep or escalating turns the ending into an escalation, and the
    model writes its summary for the humans (its tools stay denied). A turn that ended with a
    report, or with nothing, looks for news that came meanwhile. Anything else ends.
    """
    if lease_lost:
        return AfterTurn(END, ending, reason)
    if refused is not None:
        return AfterTurn(END, *_refused(ending, reason, refused))
    if tripped is not None and ending not in ("escalate", "sleep"):
        return AfterTurn(SUMMARIZE, "escalate", trip_reason or "circuit breaker")
    if ending in (None, "complete"):
        return AfterTurn(CHECK_NEWS, ending, reason)
    return AfterTurn(END, ending, reason)


@dataclass(frozen=True)
class TaskOutcome:
    outcome: Outcome
    detail: str
    #: The commit message to save the work in progress under first (None: nothing to save).
    save_as: str | None = None


def _refused(ending: Ending, reason: str, refused: str) -> tuple[Ending, str]:
    return (ending, reason) if ending in ("escalate", "sleep") else ("escalate", refused)


def task_outcome(*, ending: Ending, reason: str, lease_lost: bool, refused: str | None = None) -> TaskOutcome:
    """How the task ended once the session is over (``refused``: as in :func:`after_turn`, also
    when the Copilot CLI gave the session up on the refused call).

    The router's task-end budget check comes first whatever the outcome: an escalation because
    the issue's budget is spent reaches humans with the issue's figures
    (:mod:`squadron.domain.routing.commands`), as any task's end past the budget does.
    """
    if lease_lost:
        return TaskOutcome("superseded", "the lease was lost while working")
    if refused is not None:
        ending, reason = _refused(ending, reason, refused)
    if ending == "sleep":
        return TaskOutcome("sleeping", reason, f"WIP: {reason}")
    if ending == "escalate":
        return TaskOutcome("escalated", reason, f"WIP: handed to humans: {reason}")
    return TaskOutcome("idle", reason if ending == "complete" else "the turn ended without a report")


def reported(outcome: Outcome | None) -> Reported | None:
    """What the router is told: None for a task that crashed is ``failed``; nothing is said for
    a superseded task (its successor speaks) or one that found its agent busy."""
    if outcome is None:
        return "failed"
    if outcome in ("superseded", "busy"):
        return None
    return outcome if outcome in ("sleeping", "escalated") else "idle"


#: How often a lingering task looks for news: quickly at first, then less and less often.
NEWS_POLL_SECONDS = (0.5, 1.0, 2.0, 4.0, 8.0)


def poll_times(linger_seconds: float) -> list[float]:
    """When a task lingering ``linger_seconds`` with no news reads its inbox (seconds from the start).

    Once at once, then after each pause of :data:`NEWS_POLL_SECONDS` (the last repeating), and a
    last time at the deadline: a few reads a minute, not one a second.
    """
    times, at, polls = [0.0], 0.0, 0
    while at < linger_seconds:
        at = min(at + NEWS_POLL_SECONDS[min(polls, len(NEWS_POLL_SECONDS) - 1)], linger_seconds)
        polls += 1
        times.append(at)
    return times
