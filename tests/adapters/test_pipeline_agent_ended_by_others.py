"""An agent stage whose agent a person's event finished (issue 30): its issue closed, deleted or
unassigned from the App, its pull request closed. The router routes the event (the agent is
completed or cancelled, its task stopped) and the stage's run is cancelled at once with why,
rather than waiting out its timeout (or, without one, Step Functions' year), at the run's cancel
end: the stage's ``on_error`` does not retry it, which would put an agent to work again on a closed
issue, and the run's ``on_error`` does not run, whether or not an event of its own may cancel it.

On moto's Step Functions with the real dispatcher, routing service and agent stages over the fake
registry and launcher (the same harness as test_pipeline_agent_stages.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from squadron.domain.agents import AgentStatus
from squadron.domain.events import EventEnvelope
from tests.adapters.test_pipeline_agent_stages import (
    REVIEW_THEN_COMMENT,
    REVIEWER,
    LosesTheFirstAnswer,
    Router,
    stack,
)
from tests.adapters.test_pipeline_stage_work import started
from tests.support.step_functions import Stack

__all__ = ["stack"]

DEV = "42-7-feat-dev"
IMPLEMENT_THEN_TELL = """pipelines:
  p:
    trigger: {event: issues.labeled}
    on_error:
      - {type: label, add: needs-human}
    stages:
      - id: implement
        type: agent
        agent: feat-dev
        action: "Implement #{{ trigger.n }}"
        on_error: {retry: 1, then: tell}
      - {id: done, type: action, action: comment, config: {message: "Implemented"}, on_success: __complete__}
      - {id: tell, type: action, action: comment, config: {message: "The implementation stopped"}}
"""
# the same review, in a pipeline that an event may cancel (its stages catch the cancel to its end)
STEERED_REVIEW = REVIEW_THEN_COMMENT.replace(
    "    trigger: {event: pull_request.opened}\n",
    "    trigger: {event: pull_request.opened}\n    on_events:\n      pull_request.labeled: {action: cancel}\n",
)

Ending = Callable[[Router], EventEnvelope]


@dataclass(frozen=True)
class Case:
    name: str
    pipeline: str
    agent_id: str
    ending: Ending
    status: AgentStatus
    why: str


CASES = [
    Case(
        "issue closed",
        IMPLEMENT_THEN_TELL,
        DEV,
        lambda r: r.world.events.closed(7),
        AgentStatus.COMPLETED,
        "#7 was closed by alice",
    ),
    Case(
        "issue closed as not planned",
        IMPLEMENT_THEN_TELL,
        DEV,
        lambda r: r.world.events.closed(7, reason="not_planned"),
        AgentStatus.CANCELLED,
        "#7 was closed by alice",
    ),
    Case(
        "issue deleted",
        IMPLEMENT_THEN_TELL,
        DEV,
        lambda r: r.world.events.closed(7, action="deleted"),
        AgentStatus.CANCELLED,
        "#7 was deleted by alice",
    ),
    Case(
        "issue unassigned from the App",
        IMPLEMENT_THEN_TELL,
        DEV,
        lambda r: r.world.events.unassigned(7),
        AgentStatus.CANCELLED,
        "#7 unassigned from the App by alice",
    ),
    Case(
        "pull request closed unmerged",
        REVIEW_THEN_COMMENT,
        REVIEWER,
        lambda r: r.world.events.pr_closed(7, "feature", merged=False),
        AgentStatus.CANCELLED,
        "PR #7",
    ),
    Case(
        "pull request merged, in a run an event may cancel",
        STEERED_REVIEW,
        REVIEWER,
        lambda r: r.world.events.pr_closed(7, "feature", merged=True),
        AgentStatus.COMPLETED,
        "PR #7 merged by alice",
    ),
]


def _now(r: Router, envelope: EventEnvelope) -> str:
    """``envelope`` as it happens now (after the stage put its agent to work), as a message."""
    at = r.world.now + timedelta(seconds=1)
    return envelope.model_copy(update={"occurred_at": at, "received_at": at}).to_message()


def _entered(stack: Stack, arn: str) -> set[str]:
    history = stack.sfn.get_execution_history(executionArn=arn)["events"]
    return {e["stateEnteredEventDetails"]["name"] for e in history if "stateEnteredEventDetails" in e}


def _failed(stack: Stack, arn: str) -> list[dict[str, str]]:
    history = stack.sfn.get_execution_history(executionArn=arn)["events"]
    return [e["taskFailedEventDetails"] for e in history if e["type"] == "TaskFailed"]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_an_agent_a_persons_event_finished_fails_its_stage_at_once_with_why(stack: Stack, case: Case) -> None:
    r = Router(stack)
    arn = started(stack, case.pipeline)
    _, summary = r.task()
    assert summary["waiting"] == case.agent_id
    r.begun(case.agent_id)

    routed = r.dispatch.handle(_now(r, case.ending(r)))

    assert r.world.agent(case.agent_id).status is case.status
    (settled,) = routed["pipeline_stage"]["ended"]
    assert (settled["agent"], settled["answered"], settled["outcome"]) == (
        case.agent_id,
        True,
        "Squadron.Cancelled",
    )
    # the run is cancelled with why, whether or not an event of its own may cancel it: no retry
    # puts the agent to work again, and neither the stage's nor the run's on_error runs
    held = stack.finished(arn)
    assert (held["status"], held.get("error")) == ("FAILED", "Squadron.Cancelled"), held
    assert not {"__fail__", "__escalate__", "tell"} & _entered(stack, arn)
    (failed,) = _failed(stack, arn)
    assert failed["error"] == "Squadron.Cancelled"
    assert "was ended before it completed the stage" in failed["cause"] and case.why in failed["cause"]
    assert [a for a, _, _ in r.world.launcher.launched.values()] == [case.agent_id]
    assert r.world.github.comments == []
    # the agent's task, stopped by the router, ends late: it answers nothing more
    late = r.ended(case.agent_id, outcome="idle", outputs={"verdict": "late"})[1]
    assert "pipeline_stage" not in late
    assert len(_failed(stack, arn)) == 1


def test_an_event_that_ends_no_agent_leaves_the_stage_waiting(stack: Stack) -> None:
    r = Router(stack)
    arn = started(stack, IMPLEMENT_THEN_TELL)
    r.task()
    r.begun(DEV)

    for event in (
        r.world.events.labeled(7, "ready"),
        r.world.events.closed(8),
        r.world.events.unassigned(7, "bob"),
    ):
        routed = r.dispatch.handle(_now(r, event))
        assert "pipeline_stage" not in routed, routed

    assert r.world.agent(DEV).status is AgentStatus.ACTIVE
    wait = r.world.registry.stage_wait(DEV)
    assert wait is not None and wait.answer is None
    assert stack.sfn.describe_execution(executionArn=arn)["status"] == "RUNNING"
    # the agent's own end still answers it
    _, ended = r.ended(DEV, outcome="idle")
    assert ended["pipeline_stage"]["outcome"] == "passed"
    _, done = r.task()
    assert done["pipeline_task"] == "done"


def test_a_close_delivered_again_after_an_attempt_that_stopped_before_the_answer_answers_once(
    stack: Stack,
) -> None:
    r = Router(stack)
    assert r.tasks.agents is not None
    r.tasks.agents.answers = LosesTheFirstAnswer(stack)
    arn = started(stack, IMPLEMENT_THEN_TELL)
    r.task()
    r.begun(DEV)
    closed = _now(r, r.world.events.closed(7))

    with pytest.raises(RuntimeError):
        r.dispatch.handle(closed)
    # the routing was done (the agent finished) and the answer kept, not sent
    assert r.world.agent(DEV).status is AgentStatus.COMPLETED
    wait = r.world.registry.stage_wait(DEV)
    assert wait is not None and wait.answer is not None and not wait.sent

    again: dict[str, Any] = r.dispatch.handle(closed)
    (settled,) = again["pipeline_stage"]["ended"]
    assert settled["answered"] is True
    assert stack.finished(arn)["status"] == "FAILED"
    # and once more: nothing is answered twice
    assert "pipeline_stage" not in r.dispatch.handle(closed)
    assert len(_failed(stack, arn)) == 1
    assert len(r.world.launcher.launched) == 1
