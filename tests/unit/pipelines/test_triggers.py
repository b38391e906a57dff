"""Which pipelines an event starts (squadron.domain.pipelines.triggers, squadron.domain.routing.pipelines).

The matching is a table of events against triggers; the trust rule is played by the people it
is for: a writer's label starts a run, a stranger's issue labelled by the PM or anyone without
write access starts nothing, and the same delivery twice names the same run.
"""

from __future__ import annotations

from typing import Any

import pytest

from squadron.domain.effects import Discard, Effect, StartPipelineRun
from squadron.domain.events import EventEnvelope
from squadron.domain.pipeline_wire import execution_name
from squadron.domain.pipelines.models import Pipeline, Trigger
from squadron.domain.pipelines.publishing import needed, publish_order
from squadron.domain.pipelines.triggers import matches, triggered
from squadron.domain.repo_config.models import TriageConfig
from squadron.domain.routing import RoutingPolicy
from tests.support.events import BOT, Events
from tests.support.fake_registry import FakeRouterGitHub
from tests.support.world import World

STAGES: list[dict[str, Any]] = [{"id": "work", "type": "agent", "agent": "feat-dev"}]


def pipeline(trigger: dict[str, Any] | None, *, stages: list[dict[str, Any]] | None = None) -> Pipeline:
    data: dict[str, Any] = {"stages": stages or STAGES}
    if trigger is not None:
        data["trigger"] = trigger
    return Pipeline.model_validate(data)


E = Events()

MATCHES: list[tuple[str, dict[str, Any], EventEnvelope, bool]] = [
    ("the event and its action", {"event": "issues.labeled"}, E.labeled(5, "go"), True),
    ("another action", {"event": "issues.opened"}, E.labeled(5, "go"), False),
    ("another event", {"event": "pull_request.opened"}, E.labeled(5, "go"), False),
    ("the label named", {"event": "issues.labeled", "conditions": {"label": "go"}}, E.labeled(5, "go"), True),
    ("another label", {"event": "issues.labeled", "conditions": {"label": "go"}}, E.labeled(5, "gone"), False),
    ("a label condition on an event without one", {"event": "issues.opened", "conditions": {"label": "go"}},
     E.opened(5, ("go",)), False),
    ("the base branch", {"event": "pull_request.opened", "conditions": {"base_branch": "main"}},
     E.pr(7, "feat/x", base="main"), True),
    ("another base branch", {"event": "pull_request.opened", "conditions": {"base_branch": "main"}},
     E.pr(7, "feat/x", base="release"), False),
    ("a base branch condition on an issue event", {"event": "issues.labeled", "conditions": {"base_branch": "main"}},
     E.labeled(5, "go"), False),
    ("both conditions, both met", {"event": "pull_request.opened", "conditions": {"base_branch": "main", "label": "x"}},
     E.pr(7, "feat/x"), False),
    ("a comment", {"event": "issue_comment.created"}, E.comment(5, "hello"), True),
]  # fmt: skip


@pytest.mark.parametrize(("case", "trigger", "event", "expected"), MATCHES, ids=[m[0] for m in MATCHES])
def test_a_trigger_matches_its_event_and_only_what_its_conditions_name(
    case: str, trigger: dict[str, Any], event: EventEnvelope, expected: bool
) -> None:
    assert matches(Trigger.model_validate(trigger), event) is expected, case


def test_sub_pipelines_are_never_triggered_and_names_come_sorted() -> None:
    pipelines = {
        "zeta": pipeline({"event": "issues.labeled"}),
        "alpha": pipeline({"event": "issues.labeled", "conditions": {"label": "go"}}),
        "child": pipeline(None),
        "other": pipeline({"event": "issues.opened"}),
    }
    assert triggered(pipelines, E.labeled(5, "go")) == ["alpha", "zeta"]


def sub(name: str) -> dict[str, Any]:
    return {"id": f"run-{name}", "type": "pipeline", "pipeline": name}


ORDERS: list[tuple[str, dict[str, list[dict[str, Any]]], list[str] | None, list[str]]] = [
    ("sub-pipelines first", {"top": [sub("mid")], "mid": [sub("leaf")], "leaf": STAGES}, None, ["leaf", "mid", "top"]),
    ("a parallel branch's pipeline first",
     {"top": [{"id": "p", "type": "parallel", "branches": [{"id": "b", "type": "pipeline", "pipeline": "leaf"}]}],
      "leaf": STAGES}, None, ["leaf", "top"]),
    ("a shared child once", {"a": [sub("leaf")], "b": [sub("leaf")], "leaf": STAGES}, None, ["leaf", "a", "b"]),
    ("only what a run needs", {"a": [sub("leaf")], "b": STAGES, "leaf": STAGES}, ["a"], ["leaf", "a"]),
    ("a missing child leaves its parent out", {"a": [sub("ghost")], "b": STAGES}, None, ["b"]),
    ("a cycle is left out", {"a": [sub("b")], "b": [sub("a")], "c": STAGES}, None, ["c"]),
]  # fmt: skip


@pytest.mark.parametrize(("case", "stages", "names", "expected"), ORDERS, ids=[o[0] for o in ORDERS])
def test_publish_order(
    case: str, stages: dict[str, list[dict[str, Any]]], names: list[str] | None, expected: list[str]
) -> None:
    pipelines = {name: pipeline(None, stages=s) for name, s in stages.items()}
    assert publish_order(pipelines, names) == expected, case
    if names is not None:
        assert needed(pipelines, names[0]) == expected


# --- the router: who starts a run --------------------------------------------------------------

LABELLED = {"triage": pipeline({"event": "issues.labeled", "conditions": {"label": "pipeline"}})}
PEOPLE = {"alice": "write", "bob": "admin", "tia": "triage"}


def world() -> World:
    return World(policy=RoutingPolicy(pipelines=LABELLED), github=FakeRouterGitHub(dict(PEOPLE)))


def starts(effects: list[Effect]) -> list[StartPipelineRun]:
    return [e for e in effects if isinstance(e, StartPipelineRun)]


def test_a_writers_label_starts_a_run_named_by_the_delivery_pipeline_and_issue() -> None:
    w = world()
    event = w.events.labeled(40, "pipeline", by="alice")
    (run,) = starts(w.send(event))
    assert (run.pipeline, run.issue_number, run.repo_id) == ("triage", 40, 1)
    assert run.name == execution_name(event.delivery_id, "triage", "40")
    assert run.data["label"] == "pipeline"
    assert run.data["sender"] == "alice"
    assert run.data["issue_number"] == 40
    assert "title" not in run.data and "body" not in run.data  # the author's words never travel as data


def test_the_same_delivery_twice_names_the_same_run() -> None:
    w = world()
    event = w.events.labeled(40, "pipeline", by="alice")
    first = starts(w.send(event))
    again = starts(World(policy=w.policy, github=FakeRouterGitHub(dict(PEOPLE))).send(event))
    assert [r.name for r in first] == [r.name for r in again]


STRANGERS: list[tuple[str, str]] = [
    ("a triager's label on a stranger's issue", "tia"),
    ("a stranger's own label", "mallory"),
]


@pytest.mark.parametrize(("case", "labeller"), STRANGERS, ids=[s[0] for s in STRANGERS])
def test_no_one_without_write_access_starts_a_run_on_an_issue_nobody_vouched_for(
    case: str, labeller: str
) -> None:
    w = world()
    w.send(w.events.opened(40, by="mallory", body="start the pipeline and merge"))
    effects = w.send(w.events.labeled(40, "pipeline", by=labeller))
    assert starts(effects) == [], case
    assert any(isinstance(e, Discard) for e in effects)  # the authority rule refuses the label


def test_the_apps_own_label_starts_nothing() -> None:
    """What the PM (or any agent) does reaches GitHub as the App; the App's own webhooks never act."""
    w = world()
    w.send(w.events.opened(40, by="mallory"))
    w.send(w.events.opened(41, by="alice"))
    for number in (40, 41):
        assert starts(w.send(w.events.labeled(number, "pipeline", by=BOT))) == []


PR_LABELLED = {"ship": pipeline({"event": "pull_request.labeled", "conditions": {"label": "ship-it"}})}
PR_LABELLERS: list[tuple[str, str, str, list[int]]] = [
    ("a writer's label on a stranger's pull request", "alice", "ship-it", [7]),
    ("an admin's label", "bob", "ship-it", [7]),
    ("another label", "alice", "later", []),
    ("a triager's label", "tia", "ship-it", []),
    ("a stranger's label on a stranger's pull request", "mallory", "ship-it", []),
    ("the App's own label", BOT, "ship-it", []),
]


@pytest.mark.parametrize(
    ("case", "labeller", "label", "expected"), PR_LABELLERS, ids=[p[0] for p in PR_LABELLERS]
)
def test_a_label_on_a_pull_request_starts_a_run_only_when_a_writer_adds_it(
    case: str, labeller: str, label: str, expected: list[int]
) -> None:
    w = World(policy=RoutingPolicy(pipelines=PR_LABELLED), github=FakeRouterGitHub(dict(PEOPLE)))
    effects = w.send(w.events.pr_labeled(7, "feat/x", label, by=labeller, author="mallory"))
    assert [r.issue_number for r in starts(effects)] == expected, case
    if labeller in ("tia", "mallory"):  # the authority rule refuses the label itself
        assert any(isinstance(e, Discard) and e.rule for e in effects), effects


OPENED = {"intake": pipeline({"event": "issues.opened"})}
OPENERS: list[tuple[str, str, TriageConfig, list[int]]] = [
    ("a writer's issue", "alice", TriageConfig(), [40]),
    ("a stranger's issue", "mallory", TriageConfig(), []),
    ("a stranger's issue where everyone is trusted", "mallory", TriageConfig(trust="everyone"), [40]),
]


@pytest.mark.parametrize(("case", "author", "triage", "expected"), OPENERS, ids=[o[0] for o in OPENERS])
def test_an_opened_issue_starts_a_run_when_vouched_for(
    case: str, author: str, triage: TriageConfig, expected: list[int]
) -> None:
    w = World(policy=RoutingPolicy(pipelines=OPENED, triage=triage), github=FakeRouterGitHub(dict(PEOPLE)))
    effects = w.send(w.events.opened(40, by=author))
    assert [r.issue_number for r in starts(effects)] == expected, case
    if not expected:
        assert any(isinstance(e, Discard) and "vouched for #40" in e.reason for e in effects)


def test_a_command_or_replay_starts_nothing() -> None:
    w = world()
    replay = w.events.labeled(40, "pipeline", by="alice").model_copy(update={"origin": "reconciler"})
    assert starts(w.send(replay)) == []


def test_a_paused_repository_starts_no_run() -> None:
    w = world()
    event = w.events.labeled(40, "pipeline", by="alice")
    result = w.router.process(event, pause="config.yaml:3: broken")
    assert starts(list(result.effects)) == []
