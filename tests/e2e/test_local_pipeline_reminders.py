"""A human stage that reminds its people, then is answered, played in the local stack (issue 30's
"a reminder"): moto's Step Functions interpreter runs the stage's reminder loop on a test clock
(``LocalOptions.wait_scale``: an hour's ``Wait`` passes in a second; docs/local-stack.md), the
router posts each reminder to the sandbox's pull request, and a label on the pull request answers
the stage (``pull_request.labeled``, through the ingress): a writer outside the group counts for
nothing, a member of the group does.

Every wait is for a condition (the sandbox's comments, the run's status), never for a duration.
Helpers: :mod:`tests.support.local_pipelines` and tests/e2e/test_local_pipelines.py.
"""

from __future__ import annotations

import pytest

from tests.e2e.conftest import Human, StackFactory
from tests.e2e.test_local_pipelines import OPENED, start
from tests.support.local_pipelines import until

pytestmark = pytest.mark.e2e

#: An hour of a ``Wait`` state in a second (a reminder's interval is at least an hour).
HOUR_IN_A_SECOND = 3600
REMINDER = "Pipeline `remind`: stage `ask` is still waiting. (for the human group `maintainers`) still needed"

PIPELINES = {
    "remind": {
        "trigger": OPENED,
        "stages": [
            {
                "id": "ask",
                "type": "human",
                "human": {
                    "description": "Label this pull request when it may ship.",
                    "wait_for": "label",
                    "from": "maintainers",
                    "notify": {
                        "on_enter": "Please label it.",
                        "reminder": {"interval": "1h", "max_reminders": 2, "message": "still needed"},
                    },
                },
            },
            {
                "id": "said",
                "type": "action",
                "action": "comment",
                "config": {"message": "Labelled by {{ stages.ask.by | join(', ') }}."},
            },
        ],
    }
}


def test_a_human_stage_reminds_its_group_then_a_members_label_answers_it(local_stack: StackFactory) -> None:
    stack, runs = start(local_stack, PIPELINES, wait_scale=HOUR_IN_A_SECOND)
    number = int(runs.open_pull("feature", "A writer's change")["number"])
    run = runs.run_of("remind", number)

    # Entered: the group told once; then reminded, an "hour" later, by the state machine's own Wait.
    until("the stage's entry comment", lambda: runs.said(number, "Please label it."))
    until("a reminder", lambda: runs.said(number, REMINDER))
    # A writer who is not a member of the group labels it: routed, and the stage still waits.
    Human(stack, login="alice").call("POST", f"/issues/{number}/labels", labels=["ship"])
    until("alice's label to be routed", lambda: runs.routed("pull_request", "labeled", number))
    assert runs.view(run).status == "RUNNING"
    assert "said" not in runs.entered(run)

    # A member of the group (with write access) labels it: the stage is answered, the run goes on.
    Human(stack, login="octo-maintainer").call("POST", f"/issues/{number}/labels", labels=["ready"])

    ended = runs.finished(run)
    assert ended.status == "SUCCEEDED", (ended.error, ended.cause, runs.entered(run))
    assert runs.said(number, "Labelled by octo-maintainer.")
    (ask,) = runs.outputs(run, "ask.answer-kept")
    assert ask["data"]["stages"]["ask"] == {
        "wait_for": "label",
        "from": "maintainers",
        "by": ["octo-maintainer"],
    }
    said = runs.comments(number)
    assert sum("Please label it." in body for body in said) == 1, said
    assert 1 <= sum(REMINDER in body for body in said) <= 2, said  # at most max_reminders
    assert stack.errors == []
