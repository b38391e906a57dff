"""Pipelines compiled to Amazon States Language (issue 30, item 2): tables of pipeline YAML → ASL,
asserted on the structure Step Functions runs (the runs themselves: tests/adapters/test_pipelines_compiled.py)."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from squadron.config import parse_files
from squadron.domain.pipeline_wire import (
    CHILD_NAME,
    JOIN_ANY,
    MERGE_CONFLICT,
    RUN_ESCALATED,
    SEND_AND_WAIT,
    STAGE_FAILED,
    START_CHILD,
)
from squadron.domain.pipelines.asl import COMPLETE, ESCALATE, FAIL, stage_of_key, state_key, task_states
from squadron.domain.pipelines.compile import (
    MAX_DEFINITION_BYTES,
    Compiled,
    CompileError,
    compile_pipeline,
)
from tests.unit.pipelines.test_pipeline_config import STAGE_EXAMPLES, files_with

HERE = Path(__file__).resolve().parent
QUEUE = "https://sqs.us-east-1.amazonaws.com/123456789012/squadron-dev-events.fifo"
CHILD = "arn:aws:states:us-east-1:123456789012:stateMachine:sq_42-deploy-notification:3"
SUB = "  deploy-notification:\n    stages:\n      - {id: say, type: action, action: comment, config: {message: hi}}\n"


def compiled(
    stages_yaml: str, *, extra: str = "", head: str = "", children: dict[str, str] | None = None
) -> Compiled:
    text = (
        "pipelines:\n  p:\n    trigger: {event: pull_request.opened}\n"
        + textwrap.indent(textwrap.dedent(head), "    ")
        + "    stages:\n"
        + textwrap.indent(textwrap.dedent(stages_yaml).strip(), "      ")
        + "\n"
        + SUB
        + extra
    )
    pipelines = parse_files(files_with(text)).config.pipelines
    return compile_pipeline(
        "p",
        pipelines,
        queue_url=QUEUE,
        repository_id=42,
        children={"deploy-notification": CHILD} if children is None else children,
    )


def body(task: dict[str, Any]) -> dict[str, Any]:
    value: dict[str, Any] = task["Parameters"]["MessageBody"]
    return value


def config_of(task: dict[str, Any]) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(body(task)["config"])
    return value


def states(c: Compiled) -> dict[str, dict[str, Any]]:
    value: dict[str, dict[str, Any]] = c.definition["States"]
    return value


# --- every stage type --------------------------------------------------------------------------


def _agent(c: Compiled) -> None:
    task = states(c)["build"]
    assert task["Type"] == "Task" and task["Resource"] == SEND_AND_WAIT
    parameters = task["Parameters"]
    assert parameters["QueueUrl"] == QUEUE
    assert parameters["MessageGroupId.$"] == "$$.Execution.Input.squadron.message_group"
    assert body(task)["task_token.$"] == "$$.Task.Token"
    assert (body(task)["stage_type"], body(task)["step"], body(task)["definition"]) == (
        "agent",
        "stage",
        c.digest,
    )
    assert config_of(task)["agent"] == "feat-dev" and config_of(task)["action"] == "Build {{ context.x }}"
    assert task["ResultPath"] == "$.data.stages.build" and task["Next"] == COMPLETE
    assert task["TimeoutSeconds"] == 1800
    assert task["Catch"][-1] == {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": FAIL}


def _delay(c: Compiled) -> None:
    assert states(c)["cool"] == {"Type": "Wait", "Seconds": 300, "Next": COMPLETE}


def _polled_delay(c: Compiled) -> None:
    s = states(c)
    assert s["cool-down"] == {"Type": "Wait", "Seconds": 30, "Next": "cool-down.poll"}
    poll = s["cool-down.poll"]
    assert (body(poll)["stage_type"], body(poll)["step"]) == ("gate", "poll")
    assert config_of(poll)["poll"]["check"] == "ci_status"
    polled = s["cool-down.polled"]
    # at most duration / interval polls (5m / 30s: 10), then the delay is over
    assert polled["Choices"][1]["NumericGreaterThanEquals"] == 9
    assert polled["Choices"][0]["Next"] == polled["Choices"][1]["Next"] == COMPLETE
    assert s["cool-down.again"]["Next"] == "cool-down"


def _parallel_all(c: Compiled) -> None:
    parallel = states(c)["parallel-reviews"]
    assert parallel["Type"] == "Parallel"
    assert parallel["ResultSelector"] == {
        "security_1review.$": "$[0]",
        "code_1review.$": "$[1]",
        "notify_1deploy.$": "$[2]",
    }
    tasks = task_states(c.definition)
    assert tasks["security-review"]["End"] is True and body(tasks["security-review"])["stage_type"] == "agent"
    assert tasks["notify-deploy"]["Resource"] == START_CHILD
    assert tasks["notify-deploy"]["Parameters"]["StateMachineArn"] == CHILD
    assert not any(c["ErrorEquals"] == [JOIN_ANY] for c in parallel["Catch"])


def _parallel_any(c: Compiled) -> None:
    parallel = states(c)["both"]
    assert parallel["Catch"][0] == {
        "ErrorEquals": [JOIN_ANY],
        "ResultPath": "$.data.stages.both",
        "Next": "one.ended",  # its agent branch's agent stopped first (left if it came first)
    }
    assert states(c)["one.ended"]["Next"] == COMPLETE and "two.ended" not in states(c)
    for branch, bid in zip(parallel["Branches"], ["one", "two"], strict=True):
        assert branch["States"][bid]["Next"] == f"{bid}.first"
        assert branch["States"][f"{bid}.first"] == {"Type": "Fail", "Error": JOIN_ANY, "Cause": bid}
    assert "ResultSelector" not in parallel


def _sub_pipeline_extended(c: Compiled) -> None:
    """A sub-pipeline whose timeout may be extended names its child in a state of its own, so an
    extension starts the same child again (the one at work: StartExecution's idempotent start);
    a name taken by a run that is over names a new child. Without an extension it is one task."""
    s = states(c)
    for named, run, where in (
        ("deploy", "deploy.run", s),
        ("sub", "sub.run", s["branches"]["Branches"][0]["States"]),
    ):
        assert where[named]["Type"] == "Pass" and where[named]["Next"] == run
        assert where[named]["Parameters"] == {"name.$": CHILD_NAME}
        assert where[named]["ResultPath"] == f"$.children.{named}"
        task = where[run]
        assert (task["Resource"], task["Parameters"]["Name.$"]) == (START_CHILD, f"$.children.{named}.name")
        assert task["Catch"][0] == {
            "ErrorEquals": ["StepFunctions.ExecutionAlreadyExistsException"],
            "ResultPath": "$.error",
            "Next": f"{named}.ended",
        }
        # a name taken: the child of that name described; one that succeeded is the result
        ended = where[f"{named}.ended"]
        assert ended["Resource"] == "arn:aws:states:::aws-sdk:sfn:describeExecution"
        assert ended["Parameters"]["ExecutionArn.$"] == (
            "States.Format('arn:aws:states:us-east-1:123456789012:execution:sq_42-deploy-notification:{}', "
            f"$.children.{named}.name)"
        )
        (succeeded,) = where[f"{named}.over"]["Choices"]
        assert (succeeded["StringEquals"], succeeded["Next"]) == ("SUCCEEDED", f"{named}.took")
        assert where[f"{named}.over"]["Default"] == named  # else a new child
    # an extension enters the child's task, never the state that names a new child
    assert s["deploy.notify-ext"]["Next"] == "deploy.run"
    assert s["branches"]["Branches"][0]["States"]["sub.extended"]["Next"] == "sub.run"
    # a sub-pipeline without an extensible timeout: one task, named at its entry
    fixed = s["branches"]["Branches"][1]["States"]
    assert fixed["fixed"]["Type"] == "Task" and "fixed.run" not in fixed
    assert fixed["fixed"]["Parameters"]["Name.$"] == CHILD_NAME


def _parallel_timeout(c: Compiled) -> None:
    """A parallel stage's timeout bounds each branch without its own (a branch's own replaces it),
    raised by name; past its extensions it stops the agent branches, then notifies and escalates;
    an extension happens in each branch still at work (the Parallel is never entered again, so a
    branch done keeps its result) and stops nothing."""
    s = states(c)
    parallel = s["reviews"]
    assert s["__start__"]["Parameters"]["timeouts"] == {"reviews": 7200}
    (sec, code, say) = parallel["Branches"]
    for branch, bid in ((sec, "sec"), (say, "say")):
        b = branch["States"]
        task = b[bid]
        assert task["TimeoutSecondsPath"] == "$.timeouts.reviews" and "TimeoutSeconds" not in task
        assert task["Catch"] == [
            {
                "ErrorEquals": ["States.Timeout", "States.HeartbeatTimeout"],
                "ResultPath": "$.error",
                "Next": f"{bid}.timeout",
            }
        ]
        # while extensions are left (the branch's count), the branch waits again on its own task
        (left,) = b[f"{bid}.timeout"]["Choices"]
        assert (left["Variable"], left["NumericLessThan"]) == ("$.counts.reviews_x.n", 1)
        assert left["Next"] == f"{bid}.extend" and b[f"{bid}.extend"]["Next"] == f"{bid}.extended"
        assert b[f"{bid}.extended"] == {
            "Type": "Pass",
            "Result": 3600,
            "ResultPath": "$.timeouts.reviews",
            "Next": f"{bid}.notify-ext",
        }
        note = body(b[f"{bid}.notify-ext"])
        assert (note["step"], json.loads(note["config"])["branch"]) == ("notify", bid)
        assert b[f"{bid}.notify-ext"]["Next"] == bid
        # past them, the branch ends timed out for the stage's on_timeout
        assert b[f"{bid}.timeout"]["Default"] == f"{bid}.timed-out"
        assert b[f"{bid}.timed-out"]["Error"] == "Squadron.BranchTimedOut"
    assert code["States"]["code"]["TimeoutSeconds"] == 600  # its own timeout, not extended
    assert "TimeoutSecondsPath" not in code["States"]["code"] and "code.timeout" not in code["States"]
    (timeout,) = [c for c in parallel["Catch"] if "States.Timeout" in c["ErrorEquals"]]
    assert timeout["ErrorEquals"] == ["States.Timeout", "States.HeartbeatTimeout", "Squadron.BranchTimedOut"]
    # what reaches the stage is a timeout past its extensions: never the Parallel again
    assert timeout["Next"] == "sec.expired"
    assert [name for name, state in s.items() if state.get("Next") == "reviews"] == [
        "__context__"
    ]  # its entry only
    assert "reviews.timeout" not in s and "reviews.extended" not in s
    assert s["sec.expired"]["Next"] == "code.expired" and s["code.expired"]["Next"] == "reviews.notify-end"
    for stop in ("sec.expired", "code.expired"):
        assert (body(s[stop])["stage_type"], body(s[stop])["step"]) == ("agent", "stop")
        assert s[stop]["Catch"][0]["Next"] == s[stop]["Next"]  # answered whatever happens
    assert s["reviews.notify-end"]["Next"] == ESCALATE
    # its other ways out still stop the agents first
    (other,) = [c for c in parallel["Catch"] if c["ErrorEquals"] == ["States.ALL"]]
    assert other["Next"].startswith("sec.ended")


def _gate(c: Compiled) -> None:
    s = states(c)
    verdict = s["approval-gate.ran"]
    assert verdict["Choices"] == [
        {
            "And": [
                {"Variable": "$.data.stages.approval_1gate.passed", "IsPresent": True},
                {"Variable": "$.data.stages.approval_1gate.passed", "BooleanEquals": True},
            ],
            "Next": "merge",
        }
    ]
    failed = s[verdict["Default"]]
    assert failed["Choices"][0]["NumericGreaterThanEquals"] == 2
    assert failed["Choices"][0]["Next"] == ESCALATE
    again = s[failed["Default"]]
    assert again["Parameters"] == {"n.$": "States.MathAdd($.counts.approval_1gate_l.n, 1)"}
    assert again["Next"] == "review"
    assert s["__start__"]["Parameters"]["counts"] == {"approval_1gate_l": {"n": 0}}


def _timeout_extend(c: Compiled) -> None:
    s = states(c)
    ask = s["ask"]
    assert ask["TimeoutSecondsPath"] == "$.timeouts.ask" and "TimeoutSeconds" not in ask
    assert s["__start__"]["Parameters"]["timeouts"] == {"ask": 60}
    timeout = next(
        c for c in ask["Catch"] if c["ErrorEquals"] == ["States.Timeout", "States.HeartbeatTimeout"]
    )
    choice = s[timeout["Next"]]
    assert choice["Choices"][0]["NumericLessThan"] == 2
    assert s["ask.extended"] == {
        "Type": "Pass",
        "Result": 120,
        "ResultPath": "$.timeouts.ask",
        "Next": "ask.notify-ext",
    }
    assert s["ask.notify-ext"]["Next"] == "ask"
    assert config_of(s["ask.notify-end"])["notify"] == {"target": "maintainers", "message": "late"}
    assert s["ask.notify-end"]["Next"] == "__cancel__"


def _on_error(c: Compiled) -> None:
    task = states(c)["auto-merge"]
    assert task["Retry"] == [
        {"ErrorEquals": [STAGE_FAILED], "MaxAttempts": 1, "IntervalSeconds": 1, "BackoffRate": 2.0}
    ]
    assert {"ErrorEquals": [STAGE_FAILED], "ResultPath": "$.error", "Next": ESCALATE} in task["Catch"]
    assert task["Catch"][1] == {"ErrorEquals": [MERGE_CONFLICT], "ResultPath": "$.error", "Next": "fix"}
    assert body(task)["stage_type"] == "action" and config_of(task)["action"] == "merge_pr"


def _webhook(c: Compiled) -> None:
    task = states(c)["notify-slack"]
    assert body(task)["stage_type"] == "webhook"
    assert config_of(task)["request"]["url"] == "https://hooks.slack.com/services/{{ context.slack_webhook }}"
    assert task["Retry"][0]["MaxAttempts"] == 2
    assert {"ErrorEquals": [STAGE_FAILED], "ResultPath": "$.error", "Next": FAIL} in task["Catch"]


def _sub_pipeline(c: Compiled) -> None:
    task = states(c)["deploy"]
    assert task["Resource"] == START_CHILD and task["Parameters"]["StateMachineArn"] == CHILD
    assert task["Parameters"]["Input"]["data.$"] == "$.data.trigger"
    assert task["ResultSelector"] == {"output.$": "$.Output"} and task["ResultPath"] == "$.data.stages.deploy"


def _human_reminding(c: Compiled) -> None:
    s = states(c)
    wait = s["human-approval.wait"]
    assert wait["Type"] == "Parallel" and wait["Catch"][0]["ErrorEquals"] == [JOIN_ANY]
    asked, reminders = wait["Branches"]
    assert asked["States"]["human-approval"]["TimeoutSeconds"] == 72 * 3600
    assert body(asked["States"]["human-approval"])["stage_type"] == "human"
    assert reminders["States"]["human-approval.remind-wait"]["Seconds"] == 24 * 3600
    assert reminders["States"]["human-approval.reminded"]["Choices"][0]["NumericGreaterThanEquals"] == 2
    # the answer leaves the Parallel in the JoinAny's cause and is read back as the stage's output
    assert asked["States"]["human-approval.answered"]["CausePath"] == "States.JsonToString($)"
    assert wait["Catch"][0]["Next"] == "human-approval.answer"
    kept = s["human-approval.answer-kept"]
    assert (
        kept["InputPath"] == "$.data.stages.human_1approval.v"
        and kept["ResultPath"] == "$.data.stages.human_1approval"
    )
    # a timeout: the notification, then escalation
    timeout = next(c for c in wait["Catch"] if "States.Timeout" in c["ErrorEquals"])
    assert (
        timeout["Next"] == "human-approval.notify-end" and s["human-approval.notify-end"]["Next"] == ESCALATE
    )
    assert s["__escalated__"]["Error"] == RUN_ESCALATED


def _condition(c: Compiled) -> None:
    s = states(c)
    # a router stage checks its condition itself and answers "skipped"
    assert s["sec"]["Next"] == "sec.ran"
    assert s["sec.ran"]["Choices"][0]["Next"] == "last" and s["sec.ran"]["Default"] == "wait.if"
    # a delay has a check of its own first; a transition to it enters the check
    assert s["wait.if"]["Next"] == "wait.skip" and body(s["wait.if"])["step"] == "condition"
    assert s["wait.skip"]["Default"] == "wait" and s["wait.skip"]["Choices"][0]["Next"] == "last"


def _lifecycle(c: Compiled) -> None:
    s = states(c)
    assert config_of(s[COMPLETE])["actions"] == [{"type": "comment", "body": "done"}]
    assert body(s[COMPLETE])["step"] == "on_complete" and s[COMPLETE]["Next"] == "__succeeded__"
    assert config_of(s[FAIL])["actions"] == [{"type": "label", "add": "needs-human"}]
    # nothing escalates here: no escalation states (Step Functions refuses unreachable ones)
    assert ESCALATE not in s and "__escalated__" not in s


def _restartable(c: Compiled) -> None:
    s = states(c)
    # a Choice first: a run whose input names a restart takes that path, any other starts as usual
    assert s["__start__"]["Type"] == "Choice"
    assert s["__start__"]["Choices"] == [
        {"Variable": "$.restart.from", "IsPresent": True, "Next": "__restart__"}
    ]
    assert s["__start__"]["Default"] == "__fresh__" and s["__fresh__"]["Next"] == "__context__"
    # a restart keeps its stages, its bounds and its context (the handler's merged in by the router)
    assert s["__restart__"]["Parameters"]["data"] == {
        "trigger.$": "$.data",
        "stages.$": "$.restart.stages",
        "context.$": "$.restart.context",
    }
    assert s["__restart__"]["Parameters"]["counts.$"] == "$.restart.counts"
    assert s["__restart__"]["Next"] == "__restart_from__" and "__restart_context__" not in s
    assert [(c["StringEquals"], c["Next"]) for c in s["__restart_from__"]["Choices"]] == [
        ("tests", "tests"),
        ("cool", "cool.if"),  # a stage's entry: its condition first
        ("review", "review"),
    ]
    # an event's cancel answers the waiting task so: the stage ends the run cancelled
    assert s["review"]["Catch"][0] == {
        "ErrorEquals": ["Squadron.Cancelled"],
        "ResultPath": "$.error",
        "Next": "__cancel__",
    }
    assert s["__cancel__"] == {
        "Type": "Fail",
        "Error": "Squadron.Cancelled",
        "Cause": "the pipeline was cancelled",
    }


def _cancellable(c: Compiled) -> None:
    s = states(c)
    assert s["__start__"]["Type"] == "Pass" and "__restart__" not in s  # no restart handler: no restart path
    assert s["review"]["Catch"][0]["ErrorEquals"] == ["Squadron.Cancelled"]


def _not_steered(c: Compiled) -> None:
    s = states(c)
    assert s["__start__"]["Type"] == "Pass" and "__restart__" not in s
    # No event of its own cancels it, but a person who ends its agent (closes the issue, merges the
    # PR) does: its stages still end the run at its cancel end, never through its on_error.
    assert s["review"]["Catch"][0] == {
        "ErrorEquals": ["Squadron.Cancelled"],
        "ResultPath": "$.error",
        "Next": "__cancel__",
    }


STEERED_STAGES = """
- {id: tests, type: agent, agent: feat-dev}
- {id: cool, type: delay, duration: 1m, condition: {labels_include: slow}}
- {id: review, type: agent, agent: pr-review}
"""

CASES: list[tuple[str, str, str, Callable[[Compiled], None]]] = [
    (
        "on_events that restart: a restart entry",
        STEERED_STAGES,
        "context: {x: 1}\non_events:\n  pull_request.synchronize: {action: invalidate_and_restart, "
        "invalidate: [review], restart_from: tests}\n",
        _restartable,
    ),
    (
        "on_events that cancel: stages catch the cancel",
        STEERED_STAGES,
        "on_events:\n  pull_request.closed: {action: cancel}\n",
        _cancellable,
    ),
    (
        "on_events that only notify: as without",
        STEERED_STAGES,
        "on_events:\n  issue_comment.created: {action: notify, notify: {message: hi}}\n",
        _not_steered,
    ),
    (
        "agent",
        "- {id: build, type: agent, agent: feat-dev, action: 'Build {{ context.x }}', timeout: 30m}",
        "",
        _agent,
    ),
    ("delay", "- {id: cool, type: delay, duration: 5m}", "", _delay),
    ("delay with a poll", STAGE_EXAMPLES["delay"], "", _polled_delay),
    ("parallel, join all", STAGE_EXAMPLES["parallel"], "", _parallel_all),
    (
        "parallel, join any",
        """
        - id: both
          type: parallel
          join: any
          branches:
            - {id: one, agent: pr-review}
            - {id: two, type: action, action: comment, config: {message: hi}}
        """,
        "",
        _parallel_any,
    ),
    (
        "parallel with a timeout, extended, then escalating",
        """
        - id: reviews
          type: parallel
          timeout: 2h
          on_timeout: {notify: {message: late}, extend: 1h, max_extensions: 1, then: escalate}
          branches:
            - {id: sec, agent: security-review}
            - {id: code, agent: pr-review, timeout: 10m}
            - {id: say, type: action, action: comment, config: {message: hi}}
        """,
        "",
        _parallel_timeout,
    ),
    (
        "sub-pipeline stage with a timeout extended",
        """
        - id: deploy
          type: pipeline
          pipeline: deploy-notification
          timeout: 1h
          on_timeout: {notify: {message: late}, extend: 1h, max_extensions: 2, then: fail}
        - id: branches
          type: parallel
          timeout: 2h
          on_timeout: {extend: 1h, max_extensions: 1, then: fail}
          branches:
            - {id: sub, type: pipeline, pipeline: deploy-notification}
            - {id: fixed, type: pipeline, pipeline: deploy-notification, timeout: 10m}
        """,
        "",
        _sub_pipeline_extended,
    ),
    (
        "gate looping back, then escalating",
        """
        - {id: review, type: agent, agent: pr-review}
        - id: approval-gate
          type: gate
          conditions: [{check: no_changes_requested}]
          on_pass: merge
          on_fail: {goto: review, max_iterations: 2, then: escalate}
        - {id: merge, type: action, action: merge_pr}
        """,
        "",
        _gate,
    ),
    (
        "timeout extended twice, then cancelled",
        """
        - id: ask
          type: human
          human: {description: ok?}
          timeout: 1m
          on_timeout:
            notify: {target: maintainers, message: late}
            extend: 2m
            max_extensions: 2
            then: cancel
        """,
        "",
        _timeout_extend,
    ),
    (
        "retry, a conflict, then escalate",
        """
        - id: auto-merge
          type: action
          action: merge_pr
          on_conflict: fix
          on_error: {retry: 1, then: escalate}
        - {id: fix, type: agent, agent: feat-dev}
        """,
        "",
        _on_error,
    ),
    ("webhook", STAGE_EXAMPLES["webhook"], "", _webhook),
    ("sub-pipeline", STAGE_EXAMPLES["pipeline"], "", _sub_pipeline),
    ("human with reminders", STAGE_EXAMPLES["human"], "", _human_reminding),
    (
        "conditions and skip_to",
        """
        - {id: sec, type: agent, agent: pr-review, condition: {labels_include: security}, skip_to: last}
        - {id: wait, type: delay, duration: 1m, condition: {labels_include: slow}, skip_to: last}
        - {id: last, type: agent, agent: pr-review}
        """,
        "",
        _condition,
    ),
    (
        "lifecycle actions",
        "- {id: a, type: agent, agent: feat-dev}",
        "on_complete: [{type: comment, body: done}]\non_error: [{type: label, add: needs-human}]\n",
        _lifecycle,
    ),
]


@pytest.mark.parametrize(("name", "stages", "head", "check"), CASES, ids=[case[0] for case in CASES])
def test_a_pipeline_compiles_to_the_states_that_run_it(
    name: str, stages: str, head: str, check: Callable[[Compiled], None]
) -> None:
    c = compiled(stages, head=head)

    check(c)
    assert c.definition["StartAt"] == "__start__"
    assert c.definition["TimeoutSeconds"] == 7 * 86400
    assert len(c.text.encode()) <= MAX_DEFINITION_BYTES
    _every_transition_lands(c.definition)


def _every_transition_lands(scope: dict[str, Any]) -> None:
    """Every Next, Default, Choice and Catch names a state of its scope; every state is reached."""
    names = set(scope["States"])
    reached = {scope["StartAt"]}
    for state in scope["States"].values():
        targets = [state[k] for k in ("Next", "Default") if k in state]
        targets += [c["Next"] for c in state.get("Choices", []) + state.get("Catch", [])]
        assert set(targets) <= names, (targets, names)
        reached |= set(targets)
        assert state.get("End") or state["Type"] in {"Choice", "Succeed", "Fail"} or "Next" in state
        for branch in state.get("Branches", []):
            _every_transition_lands(branch)
    assert reached == names, names - reached


@pytest.mark.parametrize("name", ["pr-lifecycle.yaml", "issue-to-merge.yaml"])
def test_the_reference_examples_compile(name: str) -> None:
    text = (HERE / "reference" / name).read_text(encoding="utf-8")
    config = parse_files(files_with(text.replace("pipelines:\n", "pipelines:\n", 1))).config
    (pipeline,) = config.pipelines
    c = compile_pipeline(pipeline, config.pipelines, queue_url=QUEUE, repository_id=42, children={})
    _every_transition_lands(c.definition)
    tasks = task_states(c.definition)
    stages = [s.id for s in config.pipelines[pipeline].stages]
    assert set(stages) <= set(tasks)


def test_the_same_pipeline_compiles_to_the_same_text_and_a_change_to_another() -> None:
    one = compiled("- {id: a, type: agent, agent: feat-dev}")
    again = compiled("- {id: a, type: agent, agent: feat-dev}")
    other = compiled("- {id: a, type: agent, agent: pr-review}")
    moved = compiled(STAGE_EXAMPLES["pipeline"], children={"deploy-notification": CHILD[:-1] + "4"})
    assert (one.text, one.digest) == (again.text, again.digest)
    assert other.digest != one.digest and other.text != one.text
    # a sub-pipeline's new version is a new version of its parent
    assert moved.digest != compiled(STAGE_EXAMPLES["pipeline"]).digest


def test_a_sub_pipeline_without_a_published_version_is_refused() -> None:
    with pytest.raises(CompileError, match="no published version of sub-pipeline"):
        compiled(STAGE_EXAMPLES["pipeline"], children={})


def test_a_definition_past_the_size_limit_is_refused_with_the_reason() -> None:
    # quotes double when the stage's configuration is carried as text, and again in the definition
    quotes = '"' * 9000
    stages = "\n".join(
        f"- {{id: s{i}, type: agent, agent: feat-dev, context: {{q: '{quotes}'}}}}" for i in range(8)
    )
    with pytest.raises(
        CompileError, match=r"compiles to a state machine of \d+ bytes, over Step Functions' 262144"
    ):
        compiled(stages)


def test_the_repository_context_is_never_read_as_a_path() -> None:
    """An attacker's keys ending in ``.$`` would make Step Functions fill them from the run
    (another field, the task token): the context is a literal ``Result``, a stage's configuration
    a JSON string, so no key of the repository's reaches a ``Parameters`` object."""
    c = compiled(
        "- {id: a, type: agent, agent: feat-dev, context: {'token.$': '$$.Task.Token'}}",
        head="context: {'token.$': '$$.Task.Token', 'x.$': '$.squadron'}\n",
    )

    def parameter_keys(value: Any) -> list[str]:
        if isinstance(value, dict):
            return list(value) + [k for v in value.values() for k in parameter_keys(v)]
        if isinstance(value, list):
            return [k for v in value for k in parameter_keys(v)]
        return []

    for state in states(c).values():
        keys = parameter_keys(state.get("Parameters", {}))
        assert "token.$" not in keys and "x.$" not in keys
    assert states(c)["__context__"]["Result"] == {"token.$": "$$.Task.Token", "x.$": "$.squadron"}
    assert config_of(states(c)["a"])["context"] == {"token.$": "$$.Task.Token"}


@pytest.mark.parametrize("stage_id", ["a", "code-review", "a_b", "a-b_c", "a__1", "x_1-"])
def test_state_keys_are_names_and_come_back(stage_id: str) -> None:
    key = state_key(stage_id)
    assert key.replace("_", "").isalnum() and stage_of_key(key) == stage_id


def test_state_keys_never_meet() -> None:
    ids = ["a-b", "a_b", "a_1b", "a_0b", "a__b", "a--b", "a-_b", "a_-b"]
    assert len({state_key(i) for i in ids}) == len(ids)
