"""One agent lifecycle, in the pure core, for the router and the agent host alike.

- :mod:`~squadron.domain.lifecycle.transitions`: what a decision does to an agent's record —
  start (or restart as a new generation), begin (a task of it begins), wake, relaunch, sleep on
  blockers, escalate, finish and cancel — each the new record and the effects it implies (the
  conditional write first, then the task launched or stopped). The router composes its
  decisions from them; the agent gateway begins a task with :func:`begin`.
- :mod:`~squadron.domain.lifecycle.task`: how an agent's task ends, decided for the agent host
  (what follows the model's turn, what to save, what the router is told in its ``task_ended``
  command); the router answers that command with the transitions above
  (:mod:`squadron.domain.routing.commands`).
"""

from squadron.domain.lifecycle.task import (
    CHECK_NEWS,
    END,
    NEWS_POLL_SECONDS,
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
from squadron.domain.lifecycle.transitions import (
    Finished,
    Step,
    begin,
    born_asleep,
    escalate,
    finish,
    launch,
    new_generation,
    relaunch,
    restart,
    sleep,
    start,
    wake,
    with_launch,
)

__all__ = [
    "CHECK_NEWS",
    "END",
    "NEWS_POLL_SECONDS",
    "SUMMARIZE",
    "AfterTurn",
    "Ending",
    "Finished",
    "Outcome",
    "Step",
    "TaskOutcome",
    "after_turn",
    "begin",
    "born_asleep",
    "escalate",
    "finish",
    "launch",
    "new_generation",
    "poll_times",
    "relaunch",
    "reported",
    "restart",
    "sleep",
    "start",
    "task_outcome",
    "wake",
    "with_launch",
]
