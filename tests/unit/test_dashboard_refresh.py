"""Dashboards kept up to date from the domain events, at most one edit per repository per minute.

The router commits decisions and their events (the fake registry); each event reaches the
dashboards queue as the bus's rule delivers it (the whole EventBridge event); the service
renders on a simulated clock, with the queue's delays on the same clock. What is asserted is
what GitHub saw: which bodies were written, and when.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from squadron.adapters.github.errors import GitHubUnavailableError
from squadron.domain import dashboard
from squadron.domain.agents import AgentStatus
from squadron.domain.dashboard_refresh import (
    REFRESH_INTERVAL,
    RefreshRequest,
    RefreshRequestError,
    by_repository,
    delay_seconds,
    request_from_message,
)
from squadron.domain.domain_events import Repository
from squadron.domain.events import EventEnvelope
from squadron.domain.routing import RoutingPolicy
from squadron.shell.dashboards import SHOWN, DashboardService, RefreshReport
from tests.support.events import T0
from tests.support.fake_dashboards import DashboardGitHub, FakeDashboardSlots, SimulatedQueue, bus_message
from tests.support.world import World

A38 = "1-38-feat-dev"
REPO = Repository(id=1, full_name="octo/repo")
OTHER = Repository(id=2, full_name="octo/other")

# --- what a message of the dashboards queue asks ----------------------------------------------


def _bus(detail: object, source: str = "squadron") -> str:
    return json.dumps({"version": "0", "detail-type": "agent.slept.v1", "source": source, "detail": detail})


DETAIL = {
    "id": "0" * 32,
    "time": "2026-11-22T12:00:00Z",
    "stage": "dev",
    "installation": 77,
    "repository": {"id": 1, "full_name": "octo/repo"},
    "issue": 38,
    "agent": A38,
    "correlation_id": "delivery-1",
    "data": {"role": "feat-dev"},
}

MESSAGES = [
    # (id, the message's body, the request it asks, or what its error says)
    (
        "a domain event as the bus's rule delivers it",
        _bus(DETAIL),
        RefreshRequest(repository=REPO, installation=77, cause="event", event_id="0" * 32),
    ),
    (
        "a deferred rendering",
        RefreshRequest(repository=OTHER, installation=9, deferred=True).message(),
        RefreshRequest(repository=OTHER, installation=9, deferred=True),
    ),
    (
        "the reconciler's sweep",
        '{"repository": {"id": 2, "full_name": "octo/other"}, "cause": "sweep"}',
        RefreshRequest(repository=OTHER, cause="sweep"),
    ),
    ("not JSON", "{not json", "is not JSON"),
    ("JSON but no object", "[1, 2]", "is JSON list, not an object"),
    ("an event of another source", _bus(DETAIL, source="aws.s3"), "an event from 'aws.s3'"),
    ("an event without its repository", _bus({**DETAIL, "repository": None}), "repository: Input should be"),
    (
        "a request with a field of its own",
        '{"repository": {"id": 2, "full_name": "o/r"}, "x": 1}',
        "x: Extra",
    ),
    ("a repository id that is none", '{"repository": {"id": 0, "full_name": "o/r"}}', "repository.id"),
    ("an unknown cause", '{"repository": {"id": 2, "full_name": "o/r"}, "cause": "please"}', "cause"),
    ("an event id too long to be one", _bus({**DETAIL, "id": "x" * 65}), "detail.id"),
]


@pytest.mark.parametrize(("body", "expected"), [m[1:] for m in MESSAGES], ids=[m[0] for m in MESSAGES])
def test_a_dashboards_message_is_a_refresh_request_or_a_precise_error(
    body: str, expected: RefreshRequest | str
) -> None:
    if isinstance(expected, RefreshRequest):
        assert request_from_message(body) == expected
        return
    with pytest.raises(RefreshRequestError) as raised:
        request_from_message(body)
    assert expected in str(raised.value)


def test_one_request_per_repository_standing_for_all_of_its_requests() -> None:
    event = RefreshRequest(repository=REPO, installation=77, cause="event", event_id="e1")
    deferred = RefreshRequest(repository=REPO, cause="event", deferred=True)
    sweep = RefreshRequest(repository=REPO, cause="sweep")
    other = RefreshRequest(repository=OTHER, cause="sweep")
    (mine, theirs) = by_repository([event, other, deferred, sweep, event])
    assert (mine.deferred, mine.opens, mine.installation) == (True, True, 77)  # early? defers again
    assert theirs == other
    assert by_repository([event, event]) == [event] and not event.opens


DELAYS = [
    # (id, seconds until due, SQS delay)
    ("due in 59.2 s: 60 (never early by rounding)", 59.2, 60),
    ("due now: one second", 0.0, 1),
    ("overdue: one second", -5.0, 1),
    ("beyond SQS's 900: 900", 4000.0, 900),
]


@pytest.mark.parametrize(("until", "seconds"), [d[1:] for d in DELAYS], ids=[d[0] for d in DELAYS])
def test_a_deferral_is_delayed_until_it_is_due(until: float, seconds: int) -> None:
    assert delay_seconds(T0 + timedelta(seconds=until), T0) == seconds


# --- a simulated stage: the router's events -> the dashboards queue -> the service --------------


@dataclass
class Stage:
    world: World = field(default_factory=World)
    slots: FakeDashboardSlots = field(default_factory=FakeDashboardSlots)
    github: DashboardGitHub = field(default_factory=DashboardGitHub)
    now: datetime = T0
    reports: list[RefreshReport] = field(default_factory=list)
    policy: RoutingPolicy = field(default_factory=RoutingPolicy)
    #: (simulated time, body) of each write GitHub saw
    writes: list[tuple[datetime, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.queue = SimulatedQueue(clock=lambda: self.now)
        self.service = DashboardService(
            registry=self.world.registry,
            slots=self.slots,
            queue=self.queue,
            reader=self.github.reader,
            bot_login="squadron[bot]",
            policy_for=lambda repo: self.policy,
            clock=lambda: self.now,
        )
        self._published: set[str] = set()

    def act(self, at: float, envelope: EventEnvelope) -> None:
        """The router decides at ``at`` seconds; the bus delivers its new events to the queue."""
        self.now = T0 + timedelta(seconds=at)
        self.world.send(envelope)
        self.publish()

    def sweep(self, at: float) -> None:
        """The reconciler's tick asks for the repository (it opens the issue where there is none)."""
        self.queue.put(
            RefreshRequest(repository=REPO, installation=77, cause="sweep"), T0 + timedelta(seconds=at)
        )

    def publish(self) -> None:
        for event_id, event in self.world.registry.events.items():
            if event_id not in self._published:
                self._published.add(event_id)
                self.queue.put(request_from_message(bus_message(event)), self.now)

    def run(self, until: float, *, batch: int = 10) -> None:
        """Every request visible up to ``until`` seconds, in batches as Lambda receives them."""
        end = T0 + timedelta(seconds=until)
        while (visible := self.queue.next_visible()) is not None and visible <= end:
            self.now = max(self.now, visible)
            ready = self.queue.receive(self.now)
            for start in range(0, len(ready), batch):
                self.reports.append(self.service.refresh(ready[start : start + batch]))
        self.now = max(self.now, end)

    def write_times(self) -> list[float]:
        return [(at - T0).total_seconds() for at, _ in self.writes]


def _track(stage: Stage) -> None:
    """Record the simulated time of each write GitHub sees."""
    create, update = stage.github.create_issue, stage.github.update_issue

    def created(*args: object, **kwargs: object) -> dict[str, object]:
        stage.writes.append((stage.now, str(args[1] if len(args) > 1 else kwargs["body"])))
        return create(*args, **kwargs)  # type: ignore[arg-type]

    def updated(number: int, **kwargs: object) -> dict[str, object]:
        stage.writes.append((stage.now, str(kwargs["body"])))
        return update(number, **kwargs)  # type: ignore[arg-type]

    stage.github.create_issue = created  # type: ignore[method-assign]
    stage.github.update_issue = updated  # type: ignore[method-assign]


@pytest.fixture
def stage() -> Stage:
    made = Stage()
    _track(made)
    return made


def test_a_burst_of_events_is_one_edit_within_the_minute_and_a_later_change_another(stage: Stage) -> None:
    e = stage.world.events
    stage.act(0, e.assigned(38))
    stage.sweep(0)
    stage.run(0)
    assert stage.write_times() == [0.0]  # the first sweep's rendering opens the issue
    # A burst: many decisions, many events, over the next half minute.
    stage.act(5, e.assigned(39))
    stage.run(5, batch=2)
    stage.act(12, e.register_blocker(38, 42, agent_id=A38, sleep=True))
    stage.act(13, e.assigned(40))
    stage.act(20, e.register_blocker(40, 38, agent_id="1-40-feat-dev", sleep=True))
    stage.run(59, batch=2)
    assert stage.write_times() == [0.0]  # nothing more within the minute
    assert [r.deferred for r in stage.reports if r.deferred] == [["octo/repo"]]  # one deferral queued
    assert sum(len(r.covered) for r in stage.reports) >= 2  # the rest of the burst rode on it
    stage.run(60)
    assert stage.write_times() == [0.0, 60.0]  # one more edit, when the minute is over ...
    body = stage.github.body
    for shown in ("feat-dev-39", "feat-dev-40", "i38 -->|blocked by| i42", "i40 -->|blocked by| i38"):
        assert shown in body  # ... showing the whole burst
    stage.run(300)
    assert stage.write_times() == [0.0, 60.0]  # quiet: nothing queued, nothing written

    stage.act(400, e.closed(42))  # a later change, after a quiet minute: shown at once
    stage.run(400)
    assert stage.write_times() == [0.0, 60.0, 400.0]
    assert "i38 -->|blocked by| i42" not in stage.github.body


def test_events_edit_the_issue_and_only_the_sweep_opens_it(stage: Stage) -> None:
    """A burst of events never interleaves Squadron's issue with the issues it is opening."""
    stage.act(0, stage.world.events.assigned(38))
    stage.run(0)
    assert stage.github.opened == {} and stage.reports[-1].unopened == ["octo/repo"]
    stage.sweep(300)
    stage.run(300)
    assert stage.write_times() == [300.0]
    stage.act(400, stage.world.events.assigned(39))
    stage.run(400)
    assert stage.write_times() == [300.0, 400.0] and "feat-dev-39" in stage.github.body


def test_a_rendering_that_writes_nothing_does_not_delay_the_next_change(stage: Stage) -> None:
    stage.act(0, stage.world.events.assigned(38))
    stage.run(0)  # no issue yet: events do not open it, and the minute is not spent
    stage.sweep(5)
    stage.run(5)
    assert stage.write_times() == [5.0]  # the sweep opens it at once, not a minute later
    stage.sweep(100)
    stage.run(100)  # nothing changed: no edit, the minute given back
    stage.act(110, stage.world.events.assigned(39))
    stage.run(110)
    assert stage.write_times() == [5.0, 110.0]  # shown at once
    assert stage.slots.calls["release"] == 2


def test_no_edit_when_nothing_shown_changed(stage: Stage) -> None:
    stage.act(0, stage.world.events.assigned(38))
    stage.sweep(0)
    stage.run(0)
    again = RefreshRequest(repository=REPO, installation=77, cause="sweep")
    for at in (61, 200, 500):
        stage.queue.put(again, T0 + timedelta(seconds=at))
    stage.run(600)
    assert stage.write_times() == [0.0]
    assert [r.rendered for r in stage.reports] == [["octo/repo"]] * 4  # rendered, compared, not written


def test_a_deferred_request_that_comes_early_defers_again(stage: Stage) -> None:
    stage.act(0, stage.world.events.assigned(38))
    stage.sweep(0)
    stage.run(0)
    stage.act(10, stage.world.events.assigned(39))
    stage.run(10)
    ((due, _, deferred),) = stage.queue.waiting
    assert (due - T0).total_seconds() == 60 and deferred.deferred
    # Another host's clock runs two seconds ahead of the one that claimed: it comes "early".
    stage.queue.waiting = [(due - timedelta(seconds=2), 0, deferred)]
    stage.run(58)
    assert stage.write_times() == [0.0]
    ((again, _, _),) = stage.queue.waiting  # queued anew, due when the minute is over
    assert (again - T0).total_seconds() == 60
    stage.run(60)
    assert stage.write_times() == [0.0, 60.0] and "feat-dev-39" in stage.github.body


def test_a_rendering_that_fails_is_reported_and_its_retry_renders(stage: Stage) -> None:
    stage.act(0, stage.world.events.assigned(38))

    def unavailable(**_: object) -> list[dict[str, object]]:
        raise GitHubUnavailableError(502, "Bad Gateway")

    listing = stage.github.list_issues
    stage.github.list_issues = unavailable  # type: ignore[method-assign]
    stage.sweep(0)
    stage.run(0)
    (report,) = stage.reports
    assert report.failed == {1: "octo/repo: dashboard not rendered: GitHub answered 502: Bad Gateway"}
    assert stage.write_times() == []
    stage.github.list_issues = listing  # type: ignore[method-assign]
    # SQS hands the request back after its visibility timeout (well over the minute).
    stage.queue.put(
        RefreshRequest(repository=REPO, installation=77, cause="sweep"), T0 + timedelta(minutes=6)
    )
    stage.run(360)
    assert stage.write_times() == [360.0]


def test_two_repositories_are_debounced_apart(stage: Stage) -> None:
    other = DashboardGitHub(repo="octo/other", installation=77)
    service = DashboardService(
        registry=stage.world.registry,
        slots=stage.slots,
        queue=stage.queue,
        reader=lambda installation, repo: other if repo == "octo/other" else stage.github,
        bot_login="squadron[bot]",
        clock=lambda: stage.now,
    )
    stage.act(0, stage.world.events.assigned(38))
    mine = RefreshRequest(repository=REPO, installation=77, cause="sweep")
    theirs = RefreshRequest(repository=OTHER, installation=77, cause="sweep")
    report = service.refresh([mine, theirs, mine])
    assert sorted(report.rendered) == ["octo/other", "octo/repo"]  # one rendering each, no wait
    assert len(other.writes) == 1 and other.body.count("No agents at work") == 1


def test_a_repository_whose_agents_all_finished_shows_none_at_work(stage: Stage) -> None:
    e = stage.world.events
    stage.act(0, e.assigned(38))
    stage.act(1, e.pr(101, "feat/issue-38", "Closes #38"))
    stage.sweep(1)
    stage.run(1)
    assert (
        "feat-dev-38" in stage.github.body
        and "[#101](https://github.com/octo/repo/pull/101)" in stage.github.body
    )
    stage.act(100, e.pr_closed(101, "feat/issue-38", merged=True, body="Closes #38"))
    stage.run(100)  # the agents' completion is an event of the repository: its dashboard follows
    assert stage.write_times() == [1.0, 100.0]
    agents, _, ended = stage.github.body.partition("## Recently ended")
    assert "No agents at work." in agents and "feat-dev-38" not in agents
    # ... and a trace of each: who ended it (the merge, by whom), when.
    assert (
        "- 2026-11-22 12:00 UTC `feat-dev-38` ([#38](https://github.com/octo/repo/issues/38)) completed: "
        in ended
    )
    assert "PR #&#8203;101 merged by " in ended


def test_a_repository_that_turns_the_dashboard_off_gets_none(stage: Stage) -> None:
    stage.policy = RoutingPolicy(dashboard=False)
    stage.act(0, stage.world.events.assigned(38))
    stage.sweep(0)
    stage.run(0)
    assert stage.github.opened == {} and stage.reports[0].off == ["octo/repo"]


def test_a_tick_nobody_acted_on_is_undone_by_the_next_rendering(stage: Stage) -> None:
    stage.act(0, stage.world.events.assigned(38))
    stage.act(1, stage.world.events.register_blocker(38, 42, agent_id=A38, sleep=True))
    stage.sweep(1)
    stage.run(1)
    rendered = stage.github.body
    assert "- [ ] Wake `feat-dev-38`" in rendered
    (number,) = stage.github.opened
    stage.github.opened[number]["body"] = rendered.replace("- [ ] Wake", "- [x] Wake")  # a stranger
    stage.queue.put(
        RefreshRequest(repository=REPO, installation=77, cause="sweep"), T0 + timedelta(minutes=5)
    )
    stage.run(300)
    assert stage.github.body == rendered.replace(
        "_Updated 2026-11-22 12:00 UTC._", "_Updated 2026-11-22 12:05 UTC._"
    )


# --- the bound, for any timing of events --------------------------------------------------------


STATUSES = [s for s in SHOWN if s is not AgentStatus.CREATED]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    steps=st.lists(
        st.tuples(
            st.floats(min_value=0, max_value=90, allow_nan=False),  # seconds since the previous step
            st.integers(min_value=0, max_value=2),  # which agent changes
            st.sampled_from(STATUSES),  # to what
            st.booleans(),  # a real change, or an event that changes nothing shown
        ),
        min_size=1,
        max_size=25,
    ),
    early=st.floats(min_value=0, max_value=3, allow_nan=False),  # how early deferred requests come
    batch=st.integers(min_value=1, max_value=4),
)
def test_edits_are_a_minute_apart_and_the_last_change_is_always_shown(
    steps: list[tuple[float, int, AgentStatus, bool]], early: float, batch: int
) -> None:
    stage = Stage()
    _track(stage)
    for n in (38, 39, 40):
        stage.world.send(stage.world.events.assigned(n))
    stage.sweep(0)
    stage.run(0)
    at = 0.0
    for gap, which, status, changes in steps:
        at += gap
        stage.run(at, batch=batch)
        stage.now = T0 + timedelta(seconds=at)
        if changes:
            agent = stage.world.agent(f"1-{38 + which}-feat-dev")
            stage.world.registry.agents[agent.agent_id] = agent.model_copy(update={"status": status})
        stage.queue.put(RefreshRequest(repository=REPO, installation=77), stage.now)
        # deferred requests may come a little early (another host's clock)
        stage.queue.waiting = [
            (due - timedelta(seconds=early) if r.deferred else due, n, r) for due, n, r in stage.queue.waiting
        ]
    stage.run(at + 10 * REFRESH_INTERVAL.total_seconds(), batch=batch)
    times = stage.write_times()  # a minute apart, to the millisecond the slot keeps
    assert all(b - a >= REFRESH_INTERVAL.total_seconds() - 0.001 for a, b in itertools.pairwise(times)), times
    agents = [a for a in stage.world.registry.agents.values() if a.status in SHOWN]
    final = dashboard.render("octo/repo", agents, now=stage.now)
    assert dashboard.current_digest(stage.github.body) == dashboard.body_digest(final)
    assert stage.queue.waiting == []
