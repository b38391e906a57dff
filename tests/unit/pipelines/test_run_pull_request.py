"""An issue's run acts on the pull request its dev stage opened (issue 30, item 3): the dev
stage's ``pr_number`` is the framework's (the App's own pull request the router linked to the
agent), a review stage's ``pr`` puts the review role to work on it, and a gate and ``merge_pr``
read and merge it — never the run's issue, and never a number an agent made up."""

from __future__ import annotations

import json
from typing import Any

import pytest

from squadron.domain.agents import AgentStatus, BreakerCounters
from squadron.domain.effects import EvaluateMerge, LaunchAgent
from squadron.domain.pipeline_wire import STAGE_FAILED, StageFailed, StageSucceeded
from squadron.domain.pipelines.agent_stage import PutToWork, Wake, ending_answer, put_to_work
from squadron.domain.pipelines.work import Act, Judge, Refuse, numbers_read, safe_plan
from squadron.domain.routing.snapshot import IssueView
from tests.unit.pipelines.test_agent_stage import NOW, POLICY, WAIT, agent_task, record
from tests.unit.pipelines.test_stage_work import WHERE, stages, task

PR = "{{ stages.implement.outputs.pr_number }}"
#: The run of issue 7 after its dev stage: the framework's pr_number is 12.
DATA = {"trigger": {"n": 7}, "context": {}, "stages": {"implement": {"outputs": {"pr_number": "12"}}}}


# --- the dev stage's pr_number is the framework's ------------------------------------------------

DEV_WAIT = WAIT.model_copy(update={"agent_id": "42-7-feat-dev", "expected_outputs": ("pr_number",)})
DEV = record("feat-dev", counters=BreakerCounters(launches=3))

ENDS: list[tuple[str, dict[str, str], Any, Any]] = [
    ("its own pull request, reported", {"pr_number": "12"}, DEV.model_copy(update={"pr_number": 12}), "12"),
    ("its own pull request, not reported", {}, DEV.model_copy(update={"pr_number": 12}), "12"),
    # An agent (perhaps steered by what it read) names a person's pull request: the framework's wins.
    ("another pull request claimed", {"pr_number": "3"}, DEV.model_copy(update={"pr_number": 12}), "12"),
    # No pull request of its own: what it claims is not taken, and the expected output is missing.
    ("a pull request claimed, none opened", {"pr_number": "3"}, DEV, None),
]


@pytest.mark.parametrize(("name", "outputs", "agent", "pr"), ENDS, ids=[e[0] for e in ENDS])
def test_the_dev_stage_answers_the_pull_request_the_router_linked(
    name: str, outputs: dict[str, str], agent: Any, pr: str | None
) -> None:
    answer = ending_answer(DEV_WAIT, outcome="idle", reason="", outputs=outputs, agent=agent)
    if pr is None:
        assert isinstance(answer, StageFailed) and answer.error == STAGE_FAILED
        assert "without the expected output(s) pr_number" in answer.cause
    else:
        assert isinstance(answer, StageSucceeded)
        assert answer.output["outputs"]["pr_number"] == pr


# --- a review stage works on the pull request ------------------------------------------------------


def test_a_review_stage_with_pr_puts_its_role_to_work_on_the_pull_request() -> None:
    the_task = agent_task(f'{{id: review, type: agent, agent: pr-review, pr: "{PR}"}}', input=DATA)
    wake = safe_plan(the_task, WHERE)
    assert isinstance(wake, Wake) and wake.number == 12

    work = put_to_work(
        the_task,
        wake,
        view=IssueView(number=12, linked_issue=7),
        policy=POLICY,
        repo_full_name="octo/app",
        installation_id=77,
        now=NOW,
    )
    assert isinstance(work, PutToWork)
    (launch,) = [e for e in work.outside if isinstance(e, LaunchAgent)]
    assert launch.agent_id == "42-12-pr-review"
    (put,) = [w for w in work.writes if hasattr(w, "write")]
    agent = put.write.record
    assert (agent.issue_number, agent.pr_number, agent.serves_issue) == (12, 12, 7)
    assert (work.wait.agent_id, work.wait.issue_number) == ("42-12-pr-review", 12)


def test_a_running_reviewer_of_the_pull_request_is_told_not_started_twice() -> None:
    """The fixed routing started the reviewer when the App's pull request opened: the stage takes
    that agent (its current task counts), it does not start another."""
    the_task = agent_task(f'{{id: review, type: agent, agent: pr-review, pr: "{PR}"}}', input=DATA)
    wake = safe_plan(the_task, WHERE)
    assert isinstance(wake, Wake)
    running = record(agent_id="42-12-pr-review", issue_number=12, pr_number=12, task_arn="arn:task/9")
    work = put_to_work(
        the_task,
        wake,
        view=IssueView(number=12, agents=(running,), linked_issue=7),
        policy=POLICY,
        repo_full_name="octo/app",
        installation_id=77,
        now=NOW,
    )
    assert isinstance(work, PutToWork) and work.how == "told" and work.outside == ()


@pytest.mark.parametrize(
    ("stage", "data", "why"),
    [
        (
            f'{{id: a, type: agent, agent: feat-dev, pr: "{PR}"}}',
            DATA,
            "names the pull request a review role",
        ),
        (
            f'{{id: a, type: agent, agent: pr-review, pr: "{PR}"}}',
            {"stages": {}},
            "has no attribute 'pr_number'",
        ),
        (
            '{id: a, type: agent, agent: pr-review, pr: "{{ stages.implement.outputs.note }}"}',
            {"stages": {"implement": {"outputs": {"note": "#12; rm -rf"}}}},
            "not a pull request number",
        ),
    ],
)
def test_a_pr_that_is_not_a_review_s_pull_request_fails_the_stage(stage: str, data: Any, why: str) -> None:
    the_task = agent_task(stage, input=data)
    wake = safe_plan(the_task, WHERE)
    if isinstance(wake, Refuse):
        answer = wake.answer
    else:
        assert isinstance(wake, Wake)
        answer = put_to_work(  # type: ignore[assignment]
            the_task,
            wake,
            view=IssueView(number=12),
            policy=POLICY,
            repo_full_name="octo/app",
            installation_id=77,
            now=NOW,
        )
    assert isinstance(answer, StageFailed) and why in answer.cause


# --- the gate reads it, merge_pr merges it ---------------------------------------------------------


def test_merge_pr_with_pr_asks_the_merge_gate_for_that_pull_request_not_the_issue() -> None:
    (merge,) = stages(
        f'      - {{id: merge, type: action, action: merge_pr, config: {{pr: "{PR}"}}}}\n'
    ).values()
    work = safe_plan(task(merge, input=DATA), WHERE)

    assert isinstance(work, Act)
    (effect,) = work.effects
    assert isinstance(effect, EvaluateMerge) and effect.pr_number == 12
    assert work.output == {"merge": "asked", "pr": 12}


def test_merge_pr_without_pr_merges_the_run_s_own_pull_request() -> None:
    (merge,) = stages("      - {id: merge, type: action, action: merge_pr}\n").values()
    work = safe_plan(task(merge, input=DATA), WHERE)

    assert isinstance(work, Act)
    (effect,) = work.effects
    assert isinstance(effect, EvaluateMerge) and effect.pr_number == 7


def test_a_gate_on_a_templated_pr_reads_that_pull_request() -> None:
    (gate,) = stages(
        "      - id: gate\n        type: gate\n        conditions:\n"
        f'          - {{check: no_changes_requested, pr: "{PR}"}}\n'
        "          - {check: ci_status, workflows: [squadron/pr-review], pr: 5}\n"
    ).values()
    the_task = task(
        gate, input=DATA, config=json.loads(json.dumps(gate.model_dump(mode="json", exclude_none=True)))
    )
    work = safe_plan(the_task, WHERE)

    assert isinstance(work, Judge)
    assert numbers_read(work, the_task) == (5, 12)
    assert numbers_read(work, task(gate, input={"stages": {}})) == (5,)  # not rendered: judged failing


def test_an_escalated_dev_still_fails_its_stage_whatever_it_opened() -> None:
    escalated = DEV.model_copy(update={"pr_number": 12, "status": AgentStatus.ESCALATED})
    answer = ending_answer(DEV_WAIT, outcome="idle", reason="", outputs={}, agent=escalated)
    assert isinstance(answer, StageFailed)


# --- blockers stay inside the dev stage ------------------------------------------------------------

BLOCKED: list[tuple[str, Any, bool]] = [
    ("asleep on blockers the router registered: the stage waits", {"blocked_by": frozenset({9})}, True),
    ("asleep on nothing: the stage fails", {}, False),
]


@pytest.mark.parametrize(("name", "changes", "waits"), BLOCKED, ids=[b[0] for b in BLOCKED])
def test_a_dev_agent_asleep_on_its_blockers_keeps_its_stage_waiting(
    name: str, changes: dict[str, Any], waits: bool
) -> None:
    asleep = DEV.model_copy(update={"status": AgentStatus.SLEEPING, **changes})
    answer = ending_answer(DEV_WAIT, outcome="sleeping", reason="blocked by #9", outputs={}, agent=asleep)
    if waits:
        assert answer is None
    else:
        assert isinstance(answer, StageFailed) and "blocked" in answer.cause
