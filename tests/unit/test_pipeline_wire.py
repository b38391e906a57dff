"""The wire between a pipeline's state machine and the router (squadron.domain.pipeline_wire)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from squadron.domain import pipeline_wire as wire
from squadron.domain.commands import RegisterBlocker, StartRetrospective
from squadron.domain.events import command_envelope

ARN = "arn:aws:states:us-east-1:123456789012:execution:sq_42-triage:run-1"
NAME_CHARS = re.compile(r"^[A-Za-z0-9_-]{1,80}$")


def task(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": wire.TASK_KIND,
        "schema_version": 1,
        "repository_id": 42,
        "issue_number": 7,
        "pipeline": "triage",
        "definition": "ab" * 32,
        "execution_arn": ARN,
        "stage": "Develop",
        "stage_type": "agent",
        "entered_at": "2026-11-27T19:00:00.123000+00:00",
        "retry_count": 0,
        "task_token": "AQC" + "x" * 600,
        "input": {"issue": 7},
    }
    body.update(changes)
    return body


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param(json.dumps(task()), "task", id="a pipeline task"),
        pytest.param('{"delivery_id": "d-1", "event": "issues"}', None, id="an event envelope is not ours"),
        pytest.param("not json", None, id="not JSON: the envelope parser names the problem"),
        pytest.param("[1, 2]", None, id="JSON but no object"),
        pytest.param(json.dumps(task(task_token="t" * 2049)), "task_token", id="token over 2048"),
        pytest.param(json.dumps(task(input={"x": "y" * 40_000})), "input", id="input over its bound"),
        pytest.param(
            json.dumps(task(execution_arn="arn:aws:lambda:x")), "execution_arn", id="not an execution"
        ),
        pytest.param(json.dumps(task(stage_type="shell")), "stage_type", id="unknown stage type"),
        pytest.param(json.dumps(task(extra="x")), "extra", id="unknown field"),
        pytest.param(json.dumps(task(repository_id="42")), "repository_id", id="id as text"),
        pytest.param(json.dumps(task(definition="XYZ")), "definition", id="digest not hex"),
        pytest.param(json.dumps(task(schema_version=2)), "schema_version", id="a later schema"),
        pytest.param(json.dumps(task(config="[1]")), "config is not a JSON object", id="config no object"),
        pytest.param(json.dumps(task(config="{")), "config is not JSON", id="config not JSON"),
        pytest.param(json.dumps(task(config="x" * 40_000)), "config", id="config over its bound"),
        pytest.param(json.dumps(task(step="shell")), "step", id="unknown step"),
    ],
)
def test_parse_task(body: str, expected: str | None) -> None:
    if expected is None:
        assert wire.parse_task(body) is None
    elif expected == "task":
        parsed = wire.parse_task(body)
        assert parsed is not None
        assert (parsed.repository_id, parsed.stage, parsed.machine) == (42, "Develop", "sq_42-triage")
        assert "AQC" not in repr(parsed)  # the token is a bearer credential: never in a log line
    else:
        with pytest.raises(wire.WireError) as caught:
            wire.parse_task(body)
        assert expected in caught.value.problem


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        pytest.param({}, None, id="its own repository's pipeline"),
        pytest.param(
            {"execution_arn": ARN.replace("sq_42-triage", "sq_43-triage")},
            "not a run of repository 42",
            id="another repository's run claims repository 42",
        ),
        pytest.param(
            {"execution_arn": ARN.replace("sq_42-triage", "sq_42-triage2")},
            "not a run of pipeline",
            id="another pipeline of the repository",
        ),
        pytest.param(
            {"execution_arn": ARN.replace("sq_42-triage", "other_42-triage")},
            "not a run of repository 42",
            id="another deployment's machine",
        ),
        pytest.param(
            {
                "execution_arn": ARN.replace("sq_42-triage", "sq-1_42-triage"),
                "repository_id": 1,
                "pipeline": "42-triage",
            },
            "not a run of repository 1's",
            id="the same account's deployment 'sq-1' claims to be 'sq' (its prefix does not end ours)",
        ),
        pytest.param(
            {"repository_id": 4, "pipeline": "2-triage"},
            "not a run of repository 4's",
            id="repository 4's pipeline '2-triage' claims repository 42's run",
        ),
    ],
)
def test_origin_problem_refuses_a_task_from_another_run(changes: dict[str, Any], problem: str | None) -> None:
    parsed = wire.parse_task(json.dumps(task(**changes)))
    assert parsed is not None
    found = wire.origin_problem(parsed, "sq")
    assert (found is None) if problem is None else (found is not None and problem in found)


@pytest.mark.parametrize(
    ("pipeline", "exact"),
    [
        ("triage", True),
        ("dev_review-2", True),
        ("review and merge", False),
        ("ünïcode", False),
        ("x" * 200, False),
        ("a/b", False),
    ],
)
def test_state_machine_names_are_valid_bounded_and_distinct(pipeline: str, exact: bool) -> None:
    name = wire.state_machine_name("squadron-prod", 123456789, pipeline)
    assert NAME_CHARS.match(name), name
    assert name.startswith("squadron-prod_123456789-")
    assert (name == f"squadron-prod_123456789-{pipeline}") is exact
    # a name that had to change never meets another pipeline's (the hash of the original)
    assert name != wire.state_machine_name("squadron-prod", 123456789, pipeline + "!")
    # no other stage's names begin like this stage's (a stage name has no "_")
    assert not wire.state_machine_name("squadron-prod-1", 23456789, pipeline).startswith("squadron-prod_")
    assert name == wire.state_machine_name("squadron-prod", 123456789, pipeline)


@pytest.mark.parametrize("prefix", ["", "-x", "has space", "p" * 33, "a.b", "a_b"])
def test_a_bad_prefix_is_refused(prefix: str) -> None:
    with pytest.raises(wire.WireError):
        wire.state_machine_name(prefix, 1, "triage")


def test_long_names_that_share_a_beginning_stay_apart() -> None:
    a = wire.state_machine_name("sq", 1, "p" * 100 + "a")
    b = wire.state_machine_name("sq", 1, "p" * 100 + "b")
    assert a != b
    assert len(a) == len(b) == wire.MAX_NAME


@pytest.mark.parametrize(
    ("parts", "same_as"),
    [
        (("delivery-1", "triage", "7"), ("delivery-1", "triage", "7")),
        (("delivery-1", "triage", "7"), None),
    ],
)
def test_execution_names_are_deterministic(parts: tuple[str, ...], same_as: tuple[str, ...] | None) -> None:
    name = wire.execution_name(*parts)
    assert NAME_CHARS.match(name)
    if same_as is not None:
        assert wire.execution_name(*same_as) == name
    assert wire.execution_name("delivery-1", "triage7") != name  # parts never run together
    with pytest.raises(wire.WireError):
        wire.execution_name("delivery-1", "")


@pytest.mark.parametrize("issue", [7, None])
def test_the_run_is_in_the_message_group_the_ingress_uses_for_its_issue(issue: int | None) -> None:
    command = RegisterBlocker(issue_number=issue, blocker_number=8) if issue else StartRetrospective()
    envelope = command_envelope(
        command,
        repository={"id": 42, "full_name": "o/r", "default_branch": "main"},
        installation_id=1,
        delivery_id="d-1",
        now=datetime(2026, 1, 1, tzinfo=UTC),
    )
    assert wire.message_group_id(42, issue) == envelope.message_group_id
    assert wire.run_input(42, issue)["squadron"]["message_group"] == envelope.message_group_id


def test_the_task_fragment_produces_every_field_of_the_task() -> None:
    parameters = wire.task_parameters(
        queue_url="https://q/events.fifo",
        repository_id=42,
        pipeline="triage",
        definition="ab" * 32,
        stage_type="gate",
    )
    produced = {key.removesuffix(".$") for key in parameters["MessageBody"]}
    assert produced == set(wire.PipelineTask.model_fields)
    assert parameters["MessageBody"]["kind"] == wire.TASK_KIND
    assert {"QueueUrl", "MessageGroupId.$", "MessageDeduplicationId.$"} <= set(parameters)


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"definition": "not-a-digest"}, "definition digest"),
        ({"input_path": "data"}, "JSONPath"),
    ],
)
def test_the_task_fragment_refuses_what_the_router_would_refuse(
    changes: dict[str, Any], problem: str
) -> None:
    arguments: dict[str, Any] = {
        "queue_url": "https://q/events.fifo",
        "repository_id": 42,
        "pipeline": "triage",
        "definition": "ab" * 32,
        "stage_type": "agent",
        **changes,
    }
    with pytest.raises(wire.WireError, match=problem):
        wire.task_parameters(**arguments)


@pytest.mark.parametrize(
    ("make", "ok"),
    [
        (lambda: wire.StageSucceeded(output={"verdict": "approve"}), True),
        (lambda: wire.StageSucceeded(output={"x": "y" * 40_000}), False),
        (lambda: wire.StageFailed(error="Squadron.StageRejected", cause="no"), True),
        (lambda: wire.StageFailed(error="States.Timeout", cause="spoofing a Step Functions error"), False),
        (lambda: wire.StageFailed(error="Squadron." + "x" * 300), False),
        (lambda: wire.StageFailed(error="Squadron.X", cause="c" * 40_000), False),
    ],
)
def test_answers_are_bounded(make: Any, ok: bool) -> None:
    if ok:
        make()
    else:
        with pytest.raises(ValidationError):
            make()


def test_a_long_cause_is_cut_not_refused() -> None:
    failed = wire.StageFailed.of(wire.STAGE_REJECTED, "c" * 40_000)
    assert len(failed.cause) == wire.MAX_CAUSE
    assert failed.cause.endswith("…")


def test_definition_digest_ignores_layout() -> None:
    a = wire.definition_digest('{"StartAt": "A", "States": {"A": {"Type": "Succeed"}}}')
    b = wire.definition_digest({"States": {"A": {"Type": "Succeed"}}, "StartAt": "A"})
    c = wire.definition_digest({"States": {"A": {"Type": "Pass", "End": True}}, "StartAt": "A"})
    assert a == b != c


GOOD = wire.run_input(42, 7, {"n": 1}, repository="octo/demo", installation_id=77)


@pytest.mark.parametrize(
    ("execution_input", "found"),
    [
        (GOOD, ("octo/demo", 77)),
        (wire.run_input(42, 7, repository="octo/demo"), ("octo/demo", None)),
        # A child execution's input: its parent's ``squadron`` part, as child_parameters passes it.
        ({wire.STARTED_BY: "arn:parent", "squadron": GOOD["squadron"], "data": {}}, ("octo/demo", 77)),
        # A run started before runs carried their repository, or by something else.
        (wire.run_input(42, 7), None),
        ({}, None),
        ("text", None),
        # Another repository's run: never where this repository's task is carried out.
        (wire.run_input(43, 7, repository="octo/other", installation_id=77), None),
        ({"squadron": {**GOOD["squadron"], "repository_id": "42"}}, None),
        # Not a repository's full name, or not an installation id.
        ({"squadron": {**GOOD["squadron"], "repository": "octo/demo/../../x"}}, None),
        ({"squadron": {**GOOD["squadron"], "repository": "../demo"}}, None),
        ({"squadron": {**GOOD["squadron"], "repository": "octo/.."}}, None),
        ({"squadron": {**GOOD["squadron"], "repository": "octo/demo\n"}}, None),
        ({"squadron": {**GOOD["squadron"], "installation_id": "77"}}, None),
        ({"squadron": {**GOOD["squadron"], "installation_id": True}}, None),
    ],
)
def test_a_runs_repository_is_read_from_its_own_input_for_its_own_repository_only(
    execution_input: Any, found: tuple[str, int | None] | None
) -> None:
    assert wire.run_repository(42, execution_input) == found
