"""A run's current stages, read from histories recorded from runs on moto's Step Functions
(tests/unit/pipelines/histories.json; the recording is described there), and what is shown of a run."""

from __future__ import annotations

import copy
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from squadron.domain.pipeline_runs import (
    RunSummary,
    Waiting,
    arn_of_run,
    child_runs,
    console_url,
    current_stages,
    pipeline_of,
    repository_of,
    run_detail,
    run_id,
    runs_table,
)

HISTORIES: dict[str, list[dict[str, Any]]] = {
    name: events
    for name, events in json.loads((Path(__file__).parent / "histories.json").read_text()).items()
    if not name.startswith("_")
}
ARN = "arn:aws:states:eu-west-1:123456789012:execution:sq_42-dev:run-abc"


def now_in(name: str) -> list[tuple[str, str | None, str]]:
    return [(w.state, w.stage_type, w.waits_for) for w in current_stages(HISTORIES[name])]


@pytest.mark.parametrize(
    ("history", "expected"),
    [
        ("waiting_human", [("Approve", "human", "1 human approval")]),
        ("parallel_both", [("Security", "agent", "agent stage"), ("Docs", "gate", "gate checks")]),
        # the answered branch is left; the other still waits
        ("parallel_one_left", [("Docs", "gate", "gate checks")]),
        # a loop back into a stage: its second entry, once
        ("loop_second_entry", [("Review", "agent", "agent stage")]),
        ("succeeded", []),
        ("waiting_delay", [("Delay", None, "a delay")]),
        ("waiting_child", [("Sub", "pipeline", "its sub-pipeline run sq_42-child:sub-")]),
        ("child_waiting", [("Work", "agent", "agent stage")]),
        # the stage timed out, its Catch went on to the escalation, which waits
        ("caught_timeout_escalating", [("Escalate", "gate", "an escalation")]),
        # join any: Docs won, Dev was dropped (its state is never left in the history), the
        # Parallel's end closes it; the stage after the Parallel waits
        ("join_any_then_merge", [("Merge", "action", "action merge_pr")]),
    ],
)
def test_current_stages_of_recorded_runs(history: str, expected: list[tuple[str, str | None, str]]) -> None:
    found = now_in(history)
    # a child run's name is a hash: compare its head
    assert [
        (s, t, w[: len(e[2])] if "sub-" in e[2] else w) for (s, t, w), e in zip(found, expected, strict=False)
    ] == expected
    assert len(found) == len(expected)


def test_the_child_run_is_named_and_is_a_run_of_the_deployment() -> None:
    (child,) = child_runs(HISTORIES["waiting_child"])
    (sub,) = current_stages(HISTORIES["waiting_child"])
    assert (
        sub.child == child
        and repository_of("sq", child) == 42
        and pipeline_of("sq", run_id(child).split(":")[0]) == "child"
    )
    assert child_runs(HISTORIES["waiting_human"]) == []


def edited(name: str, change: Any) -> list[dict[str, Any]]:
    events = copy.deepcopy(HISTORIES[name])
    change(events)
    return events


def _caught_without_exit(events: list[dict[str, Any]]) -> None:
    """As AWS may write a caught timeout: the task times out, the next state is entered, and the
    timed-out state is never said to be left."""
    del events[[e["type"] for e in events].index("TaskStateExited")]


def _human_config(events: list[dict[str, Any]]) -> None:
    scheduled = next(e for e in events if e["type"] == "TaskScheduled")
    parameters = json.loads(scheduled["taskScheduledEventDetails"]["parameters"])
    parameters["MessageBody"]["config"] = json.dumps(
        {"type": "human", "human": {"wait_for": "approval", "from": "maintainers", "count": 2}}
    )
    scheduled["taskScheduledEventDetails"]["parameters"] = json.dumps(parameters)


def _not_ours(events: list[dict[str, Any]]) -> None:
    scheduled = next(e for e in events if e["type"] == "TaskScheduled")
    scheduled["taskScheduledEventDetails"]["parameters"] = json.dumps({"MessageBody": "hello"})


def _ended(events: list[dict[str, Any]]) -> None:
    events.append(
        {
            "id": len(events) + 1,
            "previousEventId": len(events),
            "type": "ExecutionAborted",
            "timestamp": events[-1]["timestamp"],
        }
    )


@pytest.mark.parametrize(
    ("case", "history", "change", "expected"),
    [
        (
            "a caught timeout without an exit",
            "caught_timeout_escalating",
            _caught_without_exit,
            [("Escalate", "gate", "an escalation")],
        ),
        (
            "the stage's own configuration",
            "waiting_human",
            _human_config,
            [("Approve", "human", "2 human approvals from maintainers")],
        ),
        (
            "a task that is not Squadron's message",
            "waiting_human",
            _not_ours,
            [("Approve", None, "its task to be scheduled")],
        ),
        ("an aborted run waits for nothing", "parallel_both", _ended, []),
    ],
)
def test_current_stages_of_edited_histories(case: str, history: str, change: Any, expected: Any) -> None:
    assert [
        (w.state, w.stage_type, w.waits_for) for w in current_stages(edited(history, change))
    ] == expected, case


@pytest.mark.parametrize(
    ("run", "expected"),
    [
        (ARN, ARN),
        ("sq_42-dev:run-abc", ARN),
        ("sq_42-dev", None),
        ("sq_42-dev:run-abc:extra", None),
        ("arn:aws:states:eu-west-1:123456789012:stateMachine:sq_42-dev", None),
        ("../../etc:passwd", None),
    ],
)
def test_a_run_is_named_by_its_arn_or_its_short_name(run: str, expected: str | None) -> None:
    assert arn_of_run(run, partition="aws", region="eu-west-1", account="123456789012") == expected


@pytest.mark.parametrize(
    ("prefix", "arn", "expected"),
    [
        ("sq", ARN, 42),
        ("sq", "arn:aws:states:eu-west-1:123456789012:execution:other_42-dev:run-abc", None),
        # another deployment whose prefix begins like ours
        ("sq", "arn:aws:states:eu-west-1:123456789012:execution:sq-prod_42-dev:run-abc", None),
        # the stage "sq-1" of the same account: under the old "<prefix>-" names its repository 42's
        # machine "sq-1-42-dev" read as repository 1's pipeline "42-dev" of "sq"
        ("sq", "arn:aws:states:eu-west-1:123456789012:execution:sq-1_42-dev:run-abc", None),
        ("sq", "arn:aws:states:eu-west-1:123456789012:execution:sq-1-42-dev:run-abc", None),
        ("sq", "arn:aws:states:eu-west-1:123456789012:execution:sqs_42-dev:run-abc", None),
        ("sq", "arn:aws:states:eu-west-1:123456789012:execution:sq_42:run-abc", None),
        ("sq", "arn:aws:states:eu-west-1:123456789012:execution:sq_042-dev:run-abc", None),
        ("sq", "not an arn", None),
    ],
)
def test_a_run_belongs_to_the_deployment_of_its_prefix(prefix: str, arn: str, expected: int | None) -> None:
    assert repository_of(prefix, arn) == expected


def test_the_console_link_is_the_runs_region() -> None:
    assert console_url(ARN) == (
        f"https://eu-west-1.console.aws.amazon.com/states/home?region=eu-west-1#/v2/executions/details/{ARN}"
    )


def summary(**changes: Any) -> RunSummary:
    base: dict[str, Any] = {
        "execution_arn": ARN,
        "repository_id": 42,
        "pipeline": "dev",
        "status": "RUNNING",
        "started_at": datetime(2026, 11, 28, 1, 0, tzinfo=UTC),
        "version": 3,
        "issue_number": 7,
    }
    return RunSummary(**(base | changes))


def test_what_is_shown_of_a_run_never_holds_its_task_token() -> None:
    """An operator's terminal, the dashboard issue and --json show the stage, never the token
    that answers it (the history's TaskScheduled parameters carry it, resolved)."""
    for name, events in HISTORIES.items():
        tokens = set(re.findall(r'task_token\\?": \\?"([0-9a-f-]{36})', json.dumps(events)))
        run = summary(waiting=current_stages(events), children=child_runs(events))
        shown = run_detail(run) + runs_table([run]) + json.dumps(run.row()) + repr(run)
        assert not [t for t in tokens if t in shown], name
    assert tokens  # the recorded histories do carry tokens


def test_show_says_what_the_run_waits_for_and_links_the_console() -> None:
    waiting = Waiting(
        state="Approve",
        state_type="Task",
        entered_at=datetime(2026, 11, 28, 1, 5, tzinfo=UTC),
        stage_type="human",
        config={"human": {"from": "maintainers"}},
    )
    text = run_detail(summary(waiting=[waiting], children=[ARN.replace("run-abc", "sub-1")]))
    assert "version:     3" in text and "status:      RUNNING" in text
    assert (
        "Approve [human] since 2026-11-28T01:05:00+00:00: waits for 1 human approval from maintainers" in text
    )
    assert "  sq_42-dev:sub-1" in text
    assert f"console:     {console_url(ARN)}" in text


def test_list_says_how_many_more_there_are() -> None:
    text = runs_table([summary(), summary(status="FAILED")], more=3)
    assert text.splitlines()[0].split() == [
        "RUN",
        "REPOSITORY",
        "PIPELINE",
        "VERSION",
        "ISSUE",
        "STATUS",
        "STARTED",
        "NOW",
    ]
    assert "FAILED" in text and text.endswith("... and 3 more (narrow it with --repo or --status)\n")
    assert runs_table([]) == "no pipeline runs\n"
