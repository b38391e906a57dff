"""A repository's pipelines on Step Functions (squadron.adapters.step_functions) on moto: a version
per definition change and none without, runs started on a version under a deterministic name, token
answers that treat a finished task as done."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.stub import Stubber
from moto.stepfunctions.parser.asl.eval.callback.callback import CallbackEndpoint
from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker

from squadron.adapters import moto_step_functions
from squadron.adapters.step_functions import (
    DIGEST_TAG,
    VERSION_TAG,
    Pipelines,
    RunConflictError,
    StepFunctionsUnavailableError,
)
from squadron.domain.pipeline_wire import (
    SEND_AND_WAIT,
    StageFailed,
    StageSucceeded,
    definition_digest,
    execution_name,
    run_input,
    task_parameters,
)
from tests.support.step_functions import PREFIX, ROLE, Stack, step_functions


@pytest.fixture
def stack() -> Iterator[Stack]:
    with step_functions() as made:
        yield made


def passing(result: str) -> dict[str, Any]:
    return {
        "StartAt": "P",
        "States": {"P": {"Type": "Pass", "Result": result, "ResultPath": "$.r", "End": True}},
    }


def waiting(stack: Stack, pipeline: str = "triage", **state: Any) -> dict[str, Any]:
    """One agent stage that waits for the router's answer (``state``: more of the task state)."""
    parameters = task_parameters(
        queue_url=stack.queue_url,
        repository_id=42,
        pipeline=pipeline,
        definition="ab" * 32,
        stage_type="agent",
    )
    return {
        "StartAt": "Develop",
        "States": {
            "Develop": {
                "Type": "Task",
                "Resource": SEND_AND_WAIT,
                "Parameters": parameters,
                "End": True,
                **state,
            }
        },
    }


def tags(stack: Stack, arn: str) -> dict[str, str]:
    return {t["key"]: t["value"] for t in stack.sfn.list_tags_for_resource(resourceArn=arn)["tags"]}


STEPS: list[tuple[str, str | dict[str, Any], str, str, int]] = [
    # (what happens, definition, role, outcome, version)
    ("a new pipeline is created with version 1", passing("a"), ROLE, "created", 1),
    ("the same definition publishes nothing", passing("a"), ROLE, "unchanged", 1),
    ("a changed definition publishes version 2", passing("b"), ROLE, "published", 2),
    ("unchanged again", passing("b"), ROLE, "unchanged", 2),
    (
        "the same definition laid out otherwise is the same",
        json.dumps(passing("b"), indent=2),
        ROLE,
        "unchanged",
        2,
    ),
    ("going back to an earlier definition is a new version", passing("a"), ROLE, "published", 3),
    ("a new execution role publishes too", passing("a"), ROLE + "-2", "published", 4),
]


def test_a_version_per_definition_change_and_none_without(stack: Stack) -> None:
    for what, definition, role, outcome, version in STEPS:
        pipelines = Pipelines(prefix=PREFIX, role_arn=role, client=stack.sfn)
        made = pipelines.ensure(42, "triage", definition)
        assert (made.outcome, made.version_arn) == (outcome, f"{made.state_machine_arn}:{version}"), what
        assert tags(stack, made.state_machine_arn)[VERSION_TAG] == str(version), what
        held = stack.sfn.describe_state_machine(stateMachineArn=made.version_arn)
        assert (
            definition_digest(held["definition"])
            == made.digest
            == tags(stack, made.state_machine_arn)[DIGEST_TAG]
        )


def test_a_publish_whose_tagging_was_lost_is_found_not_published_again(stack: Stack) -> None:
    made = stack.pipelines.ensure(42, "triage", passing("a"))
    # the reconciler published version 2 and stopped before tagging it
    stack.sfn.update_state_machine(
        stateMachineArn=made.state_machine_arn, definition=json.dumps(passing("b")), publish=True
    )
    again = stack.pipelines.ensure(42, "triage", passing("b"))
    assert (again.outcome, again.version_arn) == ("unchanged", f"{made.state_machine_arn}:2")
    assert tags(stack, made.state_machine_arn)[VERSION_TAG] == "2"
    # and a definition that is not the lost version's is published after it
    assert stack.pipelines.ensure(42, "triage", passing("c")).version_arn == f"{made.state_machine_arn}:3"


def test_names_are_bounded_and_repositories_apart(stack: Stack) -> None:
    a = stack.pipelines.ensure(42, "review and merge / " + "x" * 100, passing("a"))
    b = stack.pipelines.ensure(421, "triage", passing("a"))
    c = stack.pipelines.ensure(42, "triage", passing("a"))
    names = [arn.rsplit(":", 1)[1] for arn in (a.state_machine_arn, b.state_machine_arn, c.state_machine_arn)]
    assert all(len(name) <= 80 for name in names)
    assert set(stack.pipelines.machines(42)) == {a.state_machine_arn, c.state_machine_arn}
    assert stack.pipelines.machines(421) == [b.state_machine_arn]


START_STEPS: list[tuple[str, dict[str, Any], str | type[Exception]]] = [
    # (what happens, input, outcome or error)
    ("the first start starts the run", {"n": 1}, "started"),
    ("a retried start while it runs is the same run", {"n": 1}, "started"),
    ("the same name with another input is another start: refused", {"n": 2}, RunConflictError),
]


def test_a_retried_start_is_harmless(stack: Stack) -> None:
    made = stack.pipelines.ensure(42, "triage", waiting(stack))
    name = execution_name("delivery-1", "triage", "7")
    arns = set()
    for what, data, expected in START_STEPS:
        if isinstance(expected, str):
            run = stack.pipelines.start(made.version_arn, name, run_input(42, 7, data))
            assert run.outcome == expected, what
            arns.add(run.execution_arn)
        else:
            with pytest.raises(expected):
                stack.pipelines.start(made.version_arn, name, run_input(42, 7, data))
    assert len(arns) == 1
    (arn,) = arns
    assert arn == stack.pipelines.execution_arn(made.version_arn, name)
    # the run finishes; the same start again (a redelivered trigger) is "already started", not a new run
    token = stack.bodies(1)[0]["task_token"]
    assert stack.pipelines.answer(token, StageSucceeded(output={"ok": True})).delivered
    assert stack.finished(arn)["status"] == "SUCCEEDED"
    again = stack.pipelines.start(made.version_arn, name, run_input(42, 7, {"n": 1}))
    assert (again.execution_arn, again.outcome) == (arn, "already started")
    assert len(list(stack.pipelines.runs(made.state_machine_arn))) == 1
    with pytest.raises(RunConflictError):
        stack.pipelines.start(made.version_arn, name, run_input(42, 7, {"n": 3}))


@pytest.mark.parametrize(
    ("answer", "status"),
    [
        (StageSucceeded(output={"verdict": "approve"}), "SUCCEEDED"),
        (StageFailed(error="Squadron.StageRejected", cause="the gate refused"), "FAILED"),
    ],
)
def test_an_answer_to_a_finished_task_is_done_with_its_reason(
    stack: Stack, answer: StageSucceeded | StageFailed, status: str
) -> None:
    made = stack.pipelines.ensure(42, "triage", waiting(stack, HeartbeatSeconds=600, TimeoutSeconds=3600))
    run = stack.pipelines.start(made.version_arn, execution_name("d", "triage"), run_input(42, 7))
    token = stack.bodies(1)[0]["task_token"]
    assert stack.pipelines.heartbeat(token).delivered
    assert stack.pipelines.answer(token, answer).delivered
    held = stack.finished(run.execution_arn)
    assert held["status"] == status
    if status == "FAILED":
        assert held["error"] == "Squadron.StageRejected"
    # the same answer again (the router's effect retried), a heartbeat, a forged token: all "gone"
    assert stack.pipelines.answer(token, answer).gone == "InvalidToken"
    assert stack.pipelines.heartbeat(token).gone == "InvalidToken"
    assert stack.pipelines.answer("forged-token", StageSucceeded()).gone == "InvalidToken"


@pytest.mark.parametrize("code", ["ThrottlingException", "AccessDeniedException"])
def test_a_failing_service_is_an_error_to_retry(stack: Stack, code: str) -> None:
    with Stubber(stack.sfn) as stub:
        stub.add_client_error("send_task_success", service_error_code=code)
        with pytest.raises(StepFunctionsUnavailableError) as caught:
            stack.pipelines.answer("token", StageSucceeded())
    assert caught.value.code == code


def test_describe_and_stop_a_run(stack: Stack) -> None:
    made = stack.pipelines.ensure(42, "triage", waiting(stack))
    run = stack.pipelines.start(
        made.version_arn, execution_name("d", "triage"), run_input(42, None, {"x": 1})
    )
    view = stack.pipelines.describe(run.execution_arn)
    assert view is not None and view.status == "RUNNING" and view.input["data"] == {"x": 1}
    assert view.parent is None
    stack.messages(1)  # the stage waits (moto: a run stopped before its first state has no worker yet)
    assert stack.pipelines.stop(run.execution_arn, error="Squadron.Cancelled", cause="closed") == [
        run.execution_arn
    ]
    # (moto 5.2.5 does not wake a stopped run's waiting stage, so its end is not asserted here;
    # AWS ends it ABORTED at once. The parent of test_pipelines_on_moto's sub-pipeline does end.)
    assert stack.pipelines.describe(run.execution_arn.replace(":run-", ":nope-")) is None


#: (what answers run A's task while run B's interpreter thread has not begun, A's status after it)
ANSWERS_BESIDE_A_RUN_NOT_BEGUN: list[tuple[str, str]] = [
    ("a success", "SUCCEEDED"),
    ("a failure", "FAILED"),
    ("a heartbeat", "RUNNING"),
]


@pytest.mark.parametrize(("answer", "status"), ANSWERS_BESIDE_A_RUN_NOT_BEGUN)
def test_an_answer_while_another_run_has_not_begun_reaches_its_run(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, answer: str, status: str
) -> None:
    """moto marks a run RUNNING before its interpreter thread makes the run's environment; every
    answer looks through the running runs' environments for its token. Two runs started by one
    event (the default pipelines at an assignment) met this window in bench/router_calls.py:
    the answer failed with AttributeError (moto_step_functions' ``_begun_only``)."""
    made = stack.pipelines.ensure(42, "triage", waiting(stack, HeartbeatSeconds=600, TimeoutSeconds=3600))
    # the first run's interpreter thread is held before it begins (its environment not made yet);
    # the second runs, and its task is answered while the first is listed ahead of it
    held = threading.Event()
    holding = [True]
    logic = ExecutionWorker._execution_logic

    def begins_when_let(worker: ExecutionWorker) -> None:
        if holding:
            holding.clear()
            held.wait()
        logic(worker)  # type: ignore[no-untyped-call]

    monkeypatch.setattr(ExecutionWorker, "_execution_logic", begins_when_let)
    second = stack.pipelines.start(made.version_arn, execution_name("d-1", "triage"), run_input(42, 8))
    first = stack.pipelines.start(made.version_arn, execution_name("d-2", "triage"), run_input(42, 7))
    token = stack.bodies(1)[0]["task_token"]
    try:
        if answer == "a heartbeat":
            assert stack.pipelines.heartbeat(token).delivered
        else:
            outcome = (
                StageSucceeded() if answer == "a success" else StageFailed(error="Squadron.X", cause="no")
            )
            assert stack.pipelines.answer(token, outcome).delivered
        if status == "RUNNING":
            assert stack.sfn.describe_execution(executionArn=first.execution_arn)["status"] == status
        else:
            assert stack.finished(first.execution_arn)["status"] == status
    finally:
        held.set()
    # the held run begins as soon as it is let, and waits for its own answer
    assert stack.bodies(1)[0]["task_token"] != token
    assert stack.sfn.describe_execution(executionArn=second.execution_arn)["status"] == "RUNNING"


#: (the task that waits, whether its heartbeat clock is held back from starting)
HEARTBEATS: list[tuple[str, dict[str, Any], bool]] = [
    ("a task without HeartbeatSeconds", {"TimeoutSeconds": 3600}, False),
    ("a task with HeartbeatSeconds", {"HeartbeatSeconds": 600, "TimeoutSeconds": 3600}, False),
    (
        "a heartbeat between the task's message and its heartbeat clock",
        {"HeartbeatSeconds": 600, "TimeoutSeconds": 3600},
        True,
    ),
]


@pytest.mark.parametrize(("waits", "state", "held"), HEARTBEATS, ids=[c[0] for c in HEARTBEATS])
def test_a_heartbeat_is_taken_from_any_task_waiting_on_its_token(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, waits: str, state: dict[str, Any], held: bool
) -> None:
    """As AWS takes it, and the answer after it. moto took a heartbeat only from a task with
    HeartbeatSeconds, and only once its heartbeat clock was set up, after the message that carries
    the token was sent: a router that heartbeats as soon as it reads the message was told
    ``InvalidToken``, as if the task were over; an answer in that window waited out the
    task's HeartbeatSeconds."""
    let = threading.Event()
    setup = CallbackEndpoint.setup_heartbeat_endpoint

    def after_let(endpoint: CallbackEndpoint, heartbeat_seconds: int) -> Any:
        let.wait()
        return setup(endpoint, heartbeat_seconds)

    if held:
        monkeypatch.setattr(CallbackEndpoint, "setup_heartbeat_endpoint", after_let)
    else:
        let.set()
    made = stack.pipelines.ensure(42, "triage", waiting(stack, **state))
    run = stack.pipelines.start(made.version_arn, execution_name("d", "triage"), run_input(42, 7))
    token = stack.bodies(1)[0]["task_token"]
    try:
        assert stack.pipelines.heartbeat(token).delivered, waits
        # the answer too comes before the clock: the run moves on when the clock is set, as AWS's
        # does at once (moto's waited out HeartbeatSeconds: the clock heard of no answer)
        assert stack.pipelines.answer(token, StageSucceeded()).delivered
    finally:
        let.set()
    assert stack.finished(run.execution_arn)["status"] == "SUCCEEDED"


def test_patching_moto_twice_wraps_nothing_twice() -> None:
    """Every process that runs moto's interpreter patches it (tests, the local stack's servers):
    a second ``patch()`` leaves each wrapper as it is, not a wrapper of a wrapper."""
    moto_step_functions.patch()
    first = [getattr(owner, name) for owner, name, _ in moto_step_functions.WRAPPERS]
    moto_step_functions.patch()
    assert [getattr(owner, name) for owner, name, _ in moto_step_functions.WRAPPERS] == first
    for wrapped, (_, name, _) in zip(first, moto_step_functions.WRAPPERS, strict=True):
        assert not getattr(wrapped.__wrapped__, "_squadron_patched", False), name
