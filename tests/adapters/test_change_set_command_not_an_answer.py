"""A writer's ``/squadron change-set approve <id>`` is a command only (docs/change-sets.md): on an
issue a pipeline's human stage waits on for a comment, it is not that person's answer to the stage.

The stage runs for real on moto's Step Functions interpreter, answered through the dispatcher as
the router's queue hands webhooks over (the harness of ``tests/adapters/test_pipeline_human_stages.py``).
Asserted on the answers the run took.
"""

from __future__ import annotations

from tests.adapters.test_pipeline_human_stages import (
    EVENTS,
    deliver,
    handle,
    next_task,
    pipeline,
    stack,
    succeeded,
    waiting_router,
)
from tests.adapters.test_pipeline_stage_work import drive, started
from tests.support.step_functions import Stack

__all__ = ["stack"]  # the fixture


def test_a_writers_approval_command_is_no_answer_to_a_comment_wait(stack: Stack) -> None:
    r = waiting_router(stack)
    arn = started(stack, pipeline("{from: maintainers, wait_for: comment, auto_assign: false}"))
    _, message = next_task(stack)
    handle(r, message)
    command = "/squadron change-set approve cs-0123456789ab"
    said = deliver(r, EVENTS.comment(7, command, by="alice", on_pr=True))
    assert "waiting" not in said  # alice, a member who writes, approved a set: she said nothing to the stage
    assert succeeded(stack, arn) == []
    deliver(
        r, EVENTS.comment(7, f"fine by me\n\n{command}", by="bob", on_pr=True)
    )  # a command in it: still one
    assert succeeded(stack, arn) == []
    deliver(r, EVENTS.comment(7, "fine by me", by="bob", on_pr=True))
    drive(stack, r, arn)
    assert stack.finished(arn)["status"] == "SUCCEEDED"
    assert succeeded(stack, arn)[0]["by"] == ["bob"]
