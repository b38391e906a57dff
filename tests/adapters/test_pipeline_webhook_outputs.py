"""A webhook stage's ``expected_outputs`` are filled from its JSON answer (issue 30; docs/pipelines.md,
"Webhooks"), on moto's Step Functions interpreter: a later stage's template reads
``stages.<id>.outputs.<key>``; an answer that does not give them (a missing key, not JSON, a
nested value, too long, cut at the bound) fails the stage with the reason, and ``on_error``
applies. The webhook's server plays the attacker: what it answers is data, never a template and
never more than the keys the stage names.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from squadron.adapters.webhooks import MAX_BODY, Webhooks
from tests.adapters.test_pipeline_stage_work import drive, router, started
from tests.support.step_functions import Stack, step_functions

PIPELINE = """pipelines:
  p:
    trigger: {event: pull_request.opened}
    stages:
      - id: deploy
        type: webhook
        request: {url: "https://hooks.example.com/deploy"}
        expected_outputs: [version, ready]
        on_error: {then: fail}
      - id: say
        type: action
        action: comment
        config: {message: "Deployed {{ stages.deploy.outputs.version }} ready={{ stages.deploy.outputs.ready }}"}
    on_error: [{type: comment, body: "The run failed."}]
"""


@pytest.fixture
def stack() -> Iterator[Stack]:
    with step_functions() as made:
        yield made


def answering(r: Any, content: bytes, status: int = 200) -> list[httpx.Request]:
    calls: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return httpx.Response(status, content=content, headers={"content-type": "application/json"})

    r.tasks.webhooks = Webhooks(resolve=r.hooks.resolve, transport=httpx.MockTransport(handle))
    return calls


def answers(stack: Stack, arn: str) -> list[Any]:
    """The run's tasks' answers, in order."""
    return [
        json.loads(e["taskSucceededEventDetails"]["output"])
        for e in stack.sfn.get_execution_history(executionArn=arn)["events"]
        if e["type"] == "TaskSucceeded"
    ]


def failure_cause(stack: Stack, arn: str) -> str:
    (failed,) = [
        e["taskFailedEventDetails"]
        for e in stack.sfn.get_execution_history(executionArn=arn)["events"]
        if e["type"] == "TaskFailed"
    ]
    assert failed["error"] == "Squadron.StageFailed"
    return str(failed["cause"])


@pytest.mark.parametrize(
    ("answer", "comment"),
    [
        (b'{"version": "1.4.2", "ready": true}', "Deployed 1.4.2 ready=True"),
        # keys the stage does not name are not taken; a template in a value stays text
        (
            b'{"version": "{{ trigger.n }}", "ready": 1, "extra": "x", "__proto__": {"a": 1}}',
            "Deployed {{ trigger.n }} ready=1",
        ),
        (b'{"version": null, "ready": false}', "Deployed  ready=False"),
    ],
)
def test_a_webhook_answer_fills_its_expected_outputs_for_later_stages(
    stack: Stack, answer: bytes, comment: str
) -> None:
    r = router(stack)
    calls = answering(r, answer)
    arn = started(stack, PIPELINE)

    handled = drive(stack, r, arn)

    held = stack.finished(arn)
    assert held["status"] == "SUCCEEDED", held
    assert [stage for stage, _ in handled] == ["deploy", "say"]
    assert len(calls) == 1
    assert [(n, body.split("\n")[0]) for _, n, body, _ in r.world.github.comments] == [(7, comment)]
    given = json.loads(answer)
    deploy = answers(stack, arn)[0]
    assert deploy == {"status": 200, "outputs": {"version": given["version"], "ready": given["ready"]}}


@pytest.mark.parametrize(
    ("answer", "status", "reason"),
    [
        (b'{"version": "1.4.2"}', 200, "lacks the expected output(s) ready (it gave version)"),
        (b"<html>deployed</html>", 200, "is not JSON"),
        (b'["1.4.2", true]', 200, "is a JSON list, not an object"),
        (b'{"version": {"nested": "x"}, "ready": true}', 200, "output 'version' is a JSON object"),
        (b'{"version": "' + b"v" * 2_001 + b'", "ready": true}', 200, "longer than 2000 characters"),
        (b'{"version": NaN, "ready": true}', 200, "not a finite number"),
        (
            b'{"version": "1", "ready": true, "pad": "' + b"p" * MAX_BODY + b'"}',
            200,
            "longer than the most read",
        ),
    ],
)
def test_an_answer_without_its_outputs_fails_the_stage_and_on_error_applies(
    stack: Stack, answer: bytes, status: int, reason: str
) -> None:
    r = router(stack)
    answering(r, answer, status)
    arn = started(stack, PIPELINE)

    handled = drive(stack, r, arn)

    held = stack.finished(arn)
    assert held["status"] == "FAILED", held
    assert reason in failure_cause(stack, arn)
    # the later stage never ran; the pipeline's on_error did
    assert "say" not in [stage for stage, _ in handled]
    assert [body.split("\n")[0] for _, _, body, _ in r.world.github.comments] == ["The run failed."]
