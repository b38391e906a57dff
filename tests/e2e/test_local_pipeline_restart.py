"""A push to a running pipeline's pull request, in the local stack (issue 30, item 2: ``on_events``
``invalidate_and_restart``): a writer's push stops the run and starts the same version again at
the named stage, whose tasks the router carries out in the run's repository; the App's own push
and a stranger's steer nothing. Every wait is for a condition (the sandbox's comments and
deliveries, the runs' histories on moto's interpreter).

Helpers: :mod:`tests.support.local_pipelines` and tests/e2e/test_local_pipelines.py. The same
handler on moto with the router's real steering: tests/adapters/test_pipeline_reactions.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from squadron.domain.pipeline_wire import RUN_CANCELLED
from tests.e2e.conftest import Human, StackFactory
from tests.e2e.test_local_pipelines import OPENED, start
from tests.support.local_pipelines import LocalPipelines, until

pytestmark = pytest.mark.e2e

STEERED = {
    "steer": {
        "trigger": OPENED,
        "on_events": {
            "pull_request.synchronize": {"action": "invalidate_and_restart", "restart_from": "first"}
        },
        "stages": [
            {"id": "first", "type": "action", "action": "comment", "config": {"message": "first stage"}},
            {"id": "ask", "type": "human", "human": {"description": "Ship it?", "from": "maintainers"}},
            {"id": "after", "type": "action", "action": "comment", "config": {"message": "after ask"}},
        ],
    }
}


def head(runs: LocalPipelines, number: int) -> str:
    return str(runs.repo.pulls[number]["head"]["sha"])


def synchronized(runs: LocalPipelines, number: int) -> list[Any]:
    """The sandbox's ``synchronize`` deliveries about pull request ``number``, oldest first."""
    sandbox = runs.stack.sandbox
    assert sandbox is not None
    return [
        d
        for d in list(sandbox.deliveries)
        if d.event == "pull_request"
        and d.action == "synchronize"
        and (d.payload.get("pull_request") or {}).get("number") == number
    ]


def said_first(runs: LocalPipelines, number: int) -> list[int]:
    """Where the ``first`` stage's comments are among the pull request's comments."""
    return [i for i, body in enumerate(runs.comments(number)) if "first stage" in body]


def test_a_writers_push_restarts_a_waiting_run_and_the_apps_or_a_strangers_push_does_not(
    local_stack: StackFactory,
) -> None:
    stack, runs = start(local_stack, STEERED)
    number = int(runs.open_pull("steered", "A steered change")["number"])
    run = runs.run_of("steer", number)
    until("the run to wait at its human stage", lambda: "ask" in runs.entered(run))
    assert len(said_first(runs, number)) == 1

    # The App's own push (what an agent's push is) names the App as its sender; a stranger's push
    # (GitHub names a fork's owner as the sender of a fork's push; the sandbox has no forks, so a
    # reader updates the branch) is routed. Neither steers the run.
    runs.push("steered", {"docs/steered.md": "# pushed by the App\n"}, "The App's push")
    until("the App's push to be delivered", lambda: len(synchronized(runs, number)) == 1)
    Human(stack, login="mallory").call("PUT", f"/pulls/{number}/update-branch")
    until("the stranger's push to be routed", lambda: runs.routed("pull_request", "synchronize", number))
    senders = [d.payload["sender"]["login"] for d in synchronized(runs, number)]
    assert senders == [runs.bot, "mallory"], senders
    assert [e["executionArn"] for e in runs.executions("steer")] == [run]
    assert runs.view(run).status == "RUNNING"
    assert runs.entered(run).count("first") == 1 and len(said_first(runs, number)) == 1

    # A writer updates the branch: the run is stopped and the same version started at ``first``,
    # on the new head, and carried out in the run's repository through to its human stage.
    stale, before = head(runs, number), len(runs.comments(number))
    Human(stack).call("PUT", f"/pulls/{number}/update-branch")
    pushed = head(runs, number)
    assert pushed != stale
    until("a restarted run", lambda: len(runs.executions("steer")) == 2)
    restarted = str(runs.executions("steer")[0]["executionArn"])
    assert restarted != run
    until("the restarted run to wait at its human stage", lambda: "ask" in runs.entered(restarted))
    old = runs.finished(run)
    assert (old.status, old.error) == ("FAILED", RUN_CANCELLED), (old.status, old.error, old.cause)
    entered_old, entered_new = runs.entered(run), runs.entered(restarted)
    assert entered_old.count("ask") == 1 and "after" not in entered_old, entered_old
    assert (entered_new.count("first"), entered_new.count("ask")) == (1, 1), entered_new
    # ``first`` said once more, after the new head was pushed.
    (said_before, said_after) = said_first(runs, number)
    assert said_before < before <= said_after
    assert runs.view(restarted).input["squadron"]["issue_number"] == number

    # A maintainer approves: the restarted run goes on past its human stage and ends; the stopped
    # run's wait is over and says nothing.
    Human(stack, login="octo-maintainer").call("POST", f"/pulls/{number}/reviews", event="APPROVE", body="ok")
    done = runs.finished(restarted)
    assert done.status == "SUCCEEDED", (done.status, done.error, done.cause, runs.entered(restarted))
    assert runs.entered(restarted).count("after") == 1
    assert len([c for c in runs.comments(number) if "after ask" in c]) == 1
    assert len(said_first(runs, number)) == 2
    assert [e["executionArn"] for e in runs.executions("steer")] == [restarted, run]
    assert stack.errors == []
