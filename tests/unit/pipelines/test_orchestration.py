"""``orchestration: pipelines`` (docs/pipelines.md, "Default pipelines"): the built-in pipelines run
with a repository's own, and an event that starts a run leaves the fixed routing's work to it.

Each case is played both ways (``fixed``, today's behaviour, and ``pipelines``) through the router
wired to fakes, and asserts on what happened: which runs start, which agents start, whether the
merge gate is asked. A stranger's issue gets what it gets today under either: no run starts for
it, so its work stays the fixed routing's (and nothing of it becomes a writer's).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Any

import pytest

from squadron.config import ConfigError, parse_files
from squadron.config.default_pipelines import default_pipelines
from squadron.config.policy import routing_policy
from squadron.domain.effects import (
    Discard,
    Effect,
    EvaluateMerge,
    LaunchAgent,
    PutAgent,
    SetIssueAssignment,
    StartPipelineRun,
    VouchIssue,
)
from squadron.domain.events import EventEnvelope
from squadron.domain.orchestration import DEFAULT_ORCHESTRATION, KEPT_BY_FRAMEWORK, effective_pipelines
from squadron.domain.routing import RoutingPolicy
from tests.support.events import BOT, agent_did
from tests.support.fake_registry import FakeRouterGitHub
from tests.support.world import World

PEOPLE = {"alice": "write", "bob": "admin"}


def world(orchestration: str, **policy: Any) -> World:
    pipelines = effective_pipelines({}, default_pipelines(), orchestration)  # type: ignore[arg-type]
    return World(
        policy=RoutingPolicy(pipelines=pipelines, orchestration=orchestration, **policy),  # type: ignore[arg-type]
        github=FakeRouterGitHub(dict(PEOPLE)),
    )


def runs(effects: list[Effect]) -> list[str]:
    return sorted(e.pipeline for e in effects if isinstance(e, StartPipelineRun))


def launched(effects: list[Effect]) -> list[str]:
    return sorted(e.agent_id for e in effects if isinstance(e, LaunchAgent))


def merges(effects: list[Effect]) -> list[int]:
    return [e.pr_number for e in effects if isinstance(e, EvaluateMerge)]


@dataclass(frozen=True)
class Case:
    name: str
    orchestration: str
    #: The events sent before the one judged (each a function of the world).
    play: str
    runs: list[str]
    launched: list[str]
    merged: list[int]


def _assigned_by_a_writer(w: World) -> EventEnvelope:
    w.send(w.events.opened(40, by="alice"))
    return w.events.assigned(40, by="alice", author="alice")


def _assigned_by_the_pm_for_a_stranger(w: World) -> EventEnvelope:
    w.send(w.events.opened(41, by="mallory"))
    return agent_did(w.events.assigned(41, by=BOT, author="mallory"), "1-pm")


def _assigned_by_the_pm_for_a_writer(w: World) -> EventEnvelope:
    w.send(w.events.opened(43, by="alice"))
    return agent_did(w.events.assigned(43, by=BOT, author="alice"), "1-pm")


def _assigned_by_another_agent(w: World) -> EventEnvelope:
    """An agent that is not the PM reports an assignment of a writer's issue: it starts no run
    (nor, as today, is it the PM's triage)."""
    w.send(w.events.opened(44, by="alice"))
    return agent_did(w.events.assigned(44, by=BOT, author="alice"), "1-9-feat-dev")


def _a_strangers_issue(w: World) -> EventEnvelope:
    return w.events.opened(42, by="mallory")


def _the_apps_pull_request(w: World) -> EventEnvelope:
    w.send(w.events.opened(40, by="alice"))
    w.send(w.events.assigned(40, by="alice", author="alice"))
    return w.events.pr(9, "feat/issue-40", "Closes #40")


PLAYS = {
    "assigned by a writer": _assigned_by_a_writer,
    "the PM assigns a stranger's issue": _assigned_by_the_pm_for_a_stranger,
    "the PM assigns a writer's issue": _assigned_by_the_pm_for_a_writer,
    "another agent assigns": _assigned_by_another_agent,
    "a stranger opens an issue": _a_strangers_issue,
    "the App's pull request": _the_apps_pull_request,
}

CASES = [
    # A writer's assignment: the fixed routing starts feat-dev; under pipelines the two development
    # pipelines start (bug-development's first stage skips an issue without `bug`) and no agent
    # starts here: the run's agent stage starts it.
    Case("writer assigns, fixed", "fixed", "assigned by a writer", [], ["1-40-feat-dev"], []),
    Case("writer assigns, pipelines", "pipelines", "assigned by a writer",
         ["bug-development", "feature-development"], [], []),
    # The PM's assignment of a stranger's issue waits for a writer either way: no run starts.
    Case("PM assigns for a stranger, fixed", "fixed", "the PM assigns a stranger's issue", [], [], []),
    Case("PM assigns for a stranger, pipelines", "pipelines", "the PM assigns a stranger's issue", [], [], []),
    # The PM's assignment of a writer's issue (through the gateway: GitHub's webhook of the App's
    # act never reaches the router) starts the dev agent, or the runs that start it.
    Case("PM assigns a writer's issue, fixed", "fixed", "the PM assigns a writer's issue", [],
         ["1-43-feat-dev"], []),
    Case("PM assigns a writer's issue, pipelines", "pipelines", "the PM assigns a writer's issue",
         ["bug-development", "feature-development"], [], []),
    Case("another agent's assignment, pipelines", "pipelines", "another agent assigns", [], ["1-44-feat-dev"], []),
    # New issues reach the PM through the fixed routing either way (triage is kept by the framework).
    Case("a new issue, fixed", "fixed", "a stranger opens an issue", [], ["1-pm"], []),
    Case("a new issue, pipelines", "pipelines", "a stranger opens an issue", [], ["1-pm"], []),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_what_an_event_starts_under_each_orchestration(case: Case) -> None:
    w = world(case.orchestration)
    effects = w.send(PLAYS[case.play](w))

    assert runs(effects) == case.runs
    assert launched(effects) == case.launched
    assert merges(effects) == case.merged


def test_a_run_takes_the_work_and_the_bookkeeping_stays() -> None:
    w = world("pipelines")
    effects = w.send(_assigned_by_a_writer(w))

    assert not [e for e in effects if isinstance(e, PutAgent | LaunchAgent)]
    assert [e.assigned for e in effects if isinstance(e, SetIssueAssignment)] == [True]
    assert w.registry.get_agent("1-40-feat-dev") is None  # the run's agent stage starts it
    # The issue is known assigned as today (a later unassignment or close finds it so).
    assert any(isinstance(e, SetIssueAssignment) for e in effects)
    assert not any(isinstance(e, VouchIssue) and e.by != "alice" for e in effects)
    reasons = [e.reason for e in effects if isinstance(e, Discard)]
    assert (
        "left to pipeline run(s) bug-development, feature-development (orchestration: pipelines)" in reasons
    )


def test_the_apps_pull_request_starts_no_run_and_is_reviewed_as_today() -> None:
    """No pipeline that runs is started by a pull request: the App's own is reviewed by the fixed
    routing's agents and judged by the merge gate under either orchestration."""
    for orchestration in ("fixed", "pipelines"):
        w = world(orchestration)
        effects = w.send(_the_apps_pull_request(w))

        assert runs(effects) == [], orchestration
        assert launched(effects) == ["1-9-pr-review"], orchestration
        assert merges(effects) == [9], orchestration


# --- the setting ---------------------------------------------------------------------------------


def _policy(config: str) -> RoutingPolicy:
    return routing_policy(parse_files({"config.yaml": textwrap.dedent(config)}))


OWN = """\
orchestration: pipelines
pipelines:
  feature-development:
    trigger: {event: issues.labeled, conditions: {label: go}}
    stages:
      - {id: say, type: action, action: comment, config: {message: ours}}
"""


def test_the_default_is_the_default_pipelines() -> None:
    assert DEFAULT_ORCHESTRATION == "pipelines"
    policy = _policy("version: 1\n")
    assert policy.orchestration == "pipelines"
    assert sorted(policy.pipelines) == sorted(set(default_pipelines()) - set(KEPT_BY_FRAMEWORK))


def test_fixed_is_today_s_fixed_routing_alone() -> None:
    policy = _policy("orchestration: fixed\n")
    assert (policy.orchestration, dict(policy.pipelines)) == ("fixed", {})


def test_pipelines_brings_the_built_ins_but_those_the_framework_keeps() -> None:
    policy = _policy("orchestration: pipelines\n")

    assert policy.orchestration == "pipelines"
    assert sorted(policy.pipelines) == sorted(set(default_pipelines()) - set(KEPT_BY_FRAMEWORK))
    assert sorted(KEPT_BY_FRAMEWORK) == ["approval-default", "triage"]


def test_a_repository_s_pipeline_overrides_a_built_in_by_name() -> None:
    policy = _policy(OWN)

    assert sorted(policy.pipelines) == ["bug-development", "feature-development"]
    ours = policy.pipelines["feature-development"]
    assert ours.trigger is not None and ours.trigger.event == "issues.labeled"


def test_an_unknown_orchestration_is_refused_at_its_line() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_files({"config.yaml": "version: 1\norchestration: agents\n"})

    (problem,) = caught.value.problems
    assert (problem.line, problem.key_path) == (2, "orchestration")
