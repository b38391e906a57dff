"""A retrospective through the router: a schedule's command (or a milestone) opens its issue with
the figures code computed from the repository's history, records its period, and hands the issue
to the retrospective role's agent; the next one starts where it ended and reports its action items.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pytest

from squadron.domain.agents import AgentStatus, RoleKind
from squadron.domain.commands import StartRetrospective
from squadron.domain.effects import Discard, Effect, OpenRetrospective
from squadron.domain.event_trimming import build_envelope
from squadron.domain.events import EventEnvelope, command_envelope
from squadron.domain.repo_config.models import RetrospectiveConfig
from squadron.domain.retrospective import ActionItem, RetroRecord
from squadron.domain.routing import RoutingPolicy
from squadron.shell.memory import Memory
from squadron.shell.retrospective import Retrospectives
from squadron.shell.router import RouterService
from tests.support.events import T0, Events
from tests.support.fake_memory import FakeMemory
from tests.support.fake_registry import FakeLauncher, FakeRegistry, FakeRouterGitHub
from tests.support.webhook_examples import example

RETRO = "retrospective"


@dataclass
class Queue:
    sent: list[EventEnvelope] = field(default_factory=list)

    def send(self, envelope: EventEnvelope) -> str:
        envelope.to_message()  # it must fit on the queue
        self.sent.append(envelope)
        return f"m{len(self.sent)}"


@dataclass
class Repo:
    policy: RoutingPolicy = field(default_factory=RoutingPolicy)
    registry: FakeRegistry = field(default_factory=FakeRegistry)
    store: FakeMemory = field(default_factory=FakeMemory)
    github: FakeRouterGitHub = field(default_factory=lambda: FakeRouterGitHub({"alice": "write"}))
    queue: Queue = field(default_factory=Queue)
    events: Events = field(default_factory=Events)
    now: list[datetime] = field(default_factory=lambda: [T0 + timedelta(days=7)])

    def __post_init__(self) -> None:
        self.router = RouterService(
            registry=self.registry,
            launcher=FakeLauncher(),
            github=self.github,
            policies=lambda _e: self.policy,
            clock=lambda: self.now[0],
            queue=self.queue,
            memory=Memory(self.store),
            retrospectives=Retrospectives(
                history=self.registry,
                store=self.store,
                github=self.github,
                queue=self.queue,
                bot_login="squadron[bot]",
                clock=lambda: self.now[0],
            ),
        )

    def send(self, envelope: EventEnvelope) -> list[Effect]:
        effects: list[Effect] = list(self.router.process(envelope).effects)
        while self.queue.sent:  # what the router put on the queue is routed next, in order
            effects += self.router.process(self.queue.sent.pop(0)).effects
        return effects

    def start(self, trigger: str = "schedule", at_day: int = 7, **fields: object) -> EventEnvelope:
        command = StartRetrospective.model_validate({"trigger": trigger, **fields})
        return command_envelope(
            command,
            repository={"id": 1, "full_name": "octo/repo", "default_branch": "main"},
            installation_id=77,
            delivery_id=f"retro-1-{at_day}",
            now=T0 + timedelta(days=at_day),
        )


def _week_of_work(repo: Repo) -> None:
    """#38's agent opens PR 101 which merges; #39's agent escalates after two deaths."""
    from tests.support.events import recover  # noqa: PLC0415

    repo.now[0] = T0 + timedelta(days=1)
    repo.send(repo.events.assigned(38))
    repo.send(repo.events.pr(101, "feat/issue-38", "Fixes #38"))
    repo.send(repo.events.pr_closed(101, "feat/issue-38", merged=True, body="Fixes #38"))
    repo.send(repo.events.assigned(39))
    for _ in range(2):
        repo.send(recover(repo.events, repo.registry.agents["1-39-feat-dev"], "relaunch"))
    repo.now[0] = T0 + timedelta(days=7)


def test_a_scheduled_retrospective_opens_its_issue_with_the_figures_and_starts_its_agent() -> None:
    repo = Repo()
    _week_of_work(repo)
    repo.send(repo.start())
    (issue,) = [c for c in repo.github.created if c["labels"] == (RETRO,)]
    number = 901 + repo.github.created.index(issue)
    body = str(issue["body"])
    assert str(issue["title"]).startswith("Retrospective: 2026-")
    assert "## Figures" in body and "not by a model" in body and "This is the first." in body
    assert "| merged | 1 | #101 |" in body
    (record,) = repo.store.retrospectives(1)
    assert (record.issue_number, record.trigger) == (number, "schedule")
    assert record.window_end - record.window_start == timedelta(days=7)
    agent = repo.registry.agents[f"1-{number}-retrospective"]
    assert (agent.role, agent.kind, agent.status) == (RETRO, RoleKind.DEV, AgentStatus.CREATED)
    assert agent.branch == f"squadron/retro-{number}"
    assert "| no heartbeat for Nm \\(relaunched N time\\(s\\) already\\) | 1 |" in body  # #39's escalation


def test_the_next_retrospective_starts_where_the_last_ended_and_reports_its_action_items() -> None:
    repo = Repo()
    repo.send(repo.start(at_day=7))
    (first,) = repo.store.retrospectives(1)
    tracked = first.with_item(ActionItem(text="Split the export", kind="issue", number=950))
    tracked = tracked.with_item(ActionItem(text="Tighten pr-review", kind="pull_request", number=951))
    repo.store.put_retrospective(tracked, first.version)
    repo.github.states.update({950: "closed", 951: "open"})
    repo.now[0] = T0 + timedelta(days=14)
    repo.send(repo.start(at_day=14))
    second = max(repo.store.retrospectives(1), key=lambda r: r.window_end)
    assert second.window_start == first.window_end and second.window_end == T0 + timedelta(days=14)
    body = str(repo.github.created[-1]["body"])
    assert f"The previous one is #{first.issue_number}." in body
    assert (
        "1 of 2 done" in body and "| issue #950 | closed |" in body and "| pull request #951 | open |" in body
    )


CASES = [
    # (id, the repository's retrospective settings, the trigger, held?)
    ("scheduled, on by default", RetrospectiveConfig(), "schedule", True),
    ("turned off", RetrospectiveConfig(enabled=False), "schedule", False),
    ("a milestone, on by default", RetrospectiveConfig(), "milestone", True),
    ("a milestone, turned off", RetrospectiveConfig(on_milestone=False), "milestone", False),
    ("an operator's, even with milestones off", RetrospectiveConfig(on_milestone=False), "operator", True),
]


@pytest.mark.parametrize(("settings", "trigger", "held"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_whether_a_retrospective_is_held(settings: RetrospectiveConfig, trigger: str, held: bool) -> None:
    repo = Repo(policy=RoutingPolicy(retrospective=settings))
    effects = repo.send(repo.start(trigger))
    assert any(isinstance(e, OpenRetrospective) for e in effects) is held
    assert bool(repo.store.retrospectives(1)) is held
    if not held:
        assert any(isinstance(e, Discard) and "retrospective" in e.reason for e in effects)


def test_a_retried_retrospective_opens_one_issue_and_starts_one_agent() -> None:
    """The delivery fails after the issue was opened: the retry finds it by its key."""
    repo = Repo()
    envelope = repo.start()
    original = repo.store.put_retrospective
    calls = {"n": 0}

    def crash_once(record: RetroRecord, expected: int | None) -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("the router died after opening the issue")
        original(record, expected)

    repo.store.put_retrospective = crash_once  # type: ignore[method-assign,assignment]
    with pytest.raises(RuntimeError):
        repo.router.process(envelope)
    repo.send(envelope)
    assert len([c for c in repo.github.created if c["labels"] == (RETRO,)]) == 1
    assert len(repo.store.retrospectives(1)) == 1
    assert [a for a in repo.registry.agents if a.endswith("-retrospective")] == ["1-901-retrospective"]


def test_an_agent_cannot_start_a_retrospective() -> None:
    repo = Repo()
    envelope = repo.start().model_copy(update={"origin": "agent", "source_agent": "1-38-feat-dev"})
    effects = repo.send(envelope)
    assert repo.store.retrospectives(1) == [] and repo.github.created == []
    assert all(isinstance(e, Discard) for e in effects)


def test_a_milestone_closing_holds_the_retrospective_of_its_life() -> None:
    """GitHub's published milestone.closed example, through the ingress's trimming and the router."""
    payload = example("milestone", "closed")
    payload["repository"].update({"id": 1, "full_name": "octo/repo"})
    payload["milestone"]["created_at"] = "2019-05-01T09:00:00Z"  # a milestone that lived two weeks
    envelope = build_envelope(
        event="milestone", delivery_id="d-milestone", payload=payload, received_at=T0 + timedelta(days=30)
    )
    milestone = payload["milestone"]
    repo = Repo()
    effects = repo.send(envelope)
    (opened,) = [e for e in effects if isinstance(e, OpenRetrospective)]
    assert opened.trigger == "milestone" and opened.milestone_number == milestone["number"]
    (record,) = repo.store.retrospectives(1)
    assert record.window_start == datetime.fromisoformat(milestone["created_at"].replace("Z", "+00:00"))
    assert record.window_end == datetime.fromisoformat(milestone["closed_at"].replace("Z", "+00:00"))
    (issue,) = repo.github.created
    assert f"milestone {milestone['title']}" in str(issue["title"]) and "milestone" in str(issue["body"])
