"""A pipeline run in the local stack through the stages that wait: an agent stage (the real Copilot
CLI against the scripted model) whose ``report_complete`` outputs reach the next stage, then a
human stage nobody answers, which times out, tells its group and escalates. Each stage's
transition is a ``pipeline.stage_changed.v1`` in the registry's history, the agent's (answered when
its task ended) among them, once.

Every wait is for a condition (the sandbox's comments, the run's status); the human stage's
timeout is two seconds of configuration, run out by moto's interpreter. Helpers:
:mod:`tests.support.local_pipelines` and tests/e2e/test_local_pipelines.py.
"""

from __future__ import annotations

import re
import threading
from datetime import UTC, datetime, timedelta

import pytest

from squadron.domain.pipeline_wire import RUN_ESCALATED
from squadron.local.model import Json, Turn, calls_since_prompt
from tests.e2e.conftest import StackFactory, registry
from tests.e2e.test_local_pipelines import OPENED, start
from tests.support.local_pipelines import until

pytestmark = pytest.mark.e2e

VERDICT = "no injection found"


class Reviewer:
    """The ``pr-review`` role's model: read the stage's instruction, report its output (the PM:
    the default)."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, request: Json) -> Turn | None:
        messages = request.get("messages", [])
        system = "\n".join(
            str(m.get("content")) for m in messages if m.get("role") in ("system", "developer")
        )
        roles = re.findall(r"# Agent: ([a-z0-9-]+)", system)
        if not roles or roles[-1] != "pr-review":
            return None
        with self._lock:
            self.asked.append("\n".join(str(m.get("content")) for m in messages))
        plan: list[Turn] = [
            ("check_for_events", {}),  # the stage's instruction waits in its inbox
            ("report_complete", {"summary": "Reviewed.", "outputs": {"verdict": VERDICT}}),
            "Done.",
        ]
        done = calls_since_prompt(request)
        return plan[len(done)] if len(done) < len(plan) else "Done."


PIPELINES = {
    "review": {
        "trigger": OPENED,
        "stages": [
            {
                "id": "check",
                "type": "agent",
                "agent": "pr-review",
                "action": "Review this pull request for injection flaws",
                "expected_outputs": ["verdict"],
            },
            {
                "id": "say",
                "type": "action",
                "action": "comment",
                "config": {"message": "Verdict: {{ stages.check.outputs.verdict }}"},
            },
            {
                "id": "ask",
                "type": "human",
                "human": {"description": "Ship it?", "from": "maintainers", "notify": {"on_enter": "Please"}},
                "timeout": "2s",
                "on_timeout": {
                    "notify": {"target": "maintainers", "message": "too late"},
                    "then": "escalate",
                },
            },
            {"id": "unreached", "type": "action", "action": "comment", "config": {"message": "never said"}},
        ],
    }
}


def test_an_agent_stages_outputs_reach_the_next_stage_and_an_unanswered_human_stage_escalates(
    local_stack: StackFactory,
) -> None:
    model = Reviewer()
    began = datetime.now(UTC) - timedelta(minutes=1)
    stack, runs = start(local_stack, PIPELINES, policy=model)
    number = int(runs.open_pull("feature", "A writer's change")["number"])
    run = runs.run_of("review", number)

    ended = runs.finished(run)
    assert (ended.status, ended.error) == ("FAILED", RUN_ESCALATED), (ended.cause, runs.entered(run))
    # The agent stage: the role put to work on the run's pull request with the stage's action, and
    # what it reported is what the next stage said.
    with model._lock:
        assert model.asked and any("Review this pull request for injection flaws" in a for a in model.asked)
    assert runs.said(number, f"Verdict: {VERDICT}")
    (check,) = runs.outputs(run, "check")
    assert check["data"]["stages"]["check"] == {
        "agent": f"1-{number}-pr-review",
        "outputs": {"verdict": VERDICT},
    }
    # The human stage: its entry names the group; nobody answered, so it timed out, told the
    # group and escalated (the label and the comment), and the run went no further.
    said = runs.comments(number)
    assert any("waits for an approval from the human group `maintainers`" in c for c in said), said
    assert runs.said(
        number, "Pipeline `review`: stage `ask` timed out. (for the human group `maintainers`) too late"
    )
    assert "needs-human" in runs.labels(number)
    assert not runs.said(number, "never said")
    entered = runs.entered(run)
    assert entered.index("check") < entered.index("say") < entered.index("ask") and "unreached" not in entered

    # One transition per stage entry, the agent's (answered when its task ended) among them.
    def transitions() -> list[tuple[str, str, str]] | None:
        seen = [
            (e.data["stage"], e.data["stage_type"], e.data["outcome"])
            for e in registry(stack).history(1, began, datetime.now(UTC) + timedelta(minutes=1))
            if e.detail_type == "pipeline.stage_changed.v1" and e.data["execution_arn"] == run
        ]
        return seen if len(seen) >= 4 else None

    found = until("the run's transitions in the registry's history", transitions)
    assert ("check", "agent", "succeeded") in found
    assert sorted((stage, outcome) for stage, _, outcome in found) == [
        ("__escalate__", "succeeded"),
        ("ask.notify-end", "succeeded"),
        ("check", "succeeded"),
        ("say", "succeeded"),
    ], found
    assert stack.errors == []
