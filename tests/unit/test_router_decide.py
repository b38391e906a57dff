"""The router's one pure call, ``decide``, with no adapter: what it asks to read, in which
order, and what it decides once it has it (issue 29, item 4).

A test here answers each typed need from plain data (:class:`Store`), the way the shell answers
it from the registry and GitHub; every kind of need is asked at most once, so a decision is
bounded by :data:`MAX_READS` rounds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import timedelta

import pytest

from squadron.domain.agents import AgentRecord, AgentStatus, RoleKind
from squadron.domain.commands import FinishDecision
from squadron.domain.domain_events import RetrospectiveCompleted
from squadron.domain.effects import (
    Decision,
    Discard,
    EvaluateMerge,
    LaunchAgent,
    PostComment,
    PutAgent,
)
from squadron.domain.events import EventEnvelope, command_envelope
from squadron.domain.retrospective import RetroRecord
from squadron.domain.routing import IssueView, RoutingPolicy
from squadron.domain.routing.decide import (
    MAX_READS,
    NEEDS,
    Decided,
    Dropped,
    Loaded,
    Need,
    ReadContext,
    ReadDecision,
    ReadIssues,
    ReadLinkedIssues,
    ReadRetrospectives,
    Resume,
    Routed,
    decide,
)
from squadron.domain.routing.verdicts import (
    ChangeVerdict,
    KeepVerdict,
    Redescribe,
    VerdictChoice,
    gate_arguments,
    verdict_choice,
)
from tests.support.events import T0, Events

POLICY = RoutingPolicy()
REPO = 1


@dataclass
class Store:
    """What the registry and GitHub hold, as plain data (no adapter, no fake of one)."""

    views: dict[int, IssueView] = field(default_factory=dict)
    links: dict[str, int] = field(default_factory=dict)
    committed: Decision | None = None
    permissions: dict[str, str] = field(default_factory=lambda: {"alice": "write"})
    retrospectives: tuple[RetroRecord, ...] = ()

    def answer(self, need: Need, loaded: Loaded) -> Loaded:
        answered = loaded.answered | {need.kind}
        match need:
            case ReadDecision():
                return replace(loaded, answered=answered, committed=self.committed)
            case ReadIssues() | ReadLinkedIssues():
                views = {n: self.views.get(n, IssueView(n)) for n in need.numbers}
                links = {b: self.links[b] for b in getattr(need, "branches", ()) if b in self.links}
                return replace(
                    loaded,
                    answered=answered,
                    issues={**loaded.issues, **views},
                    branch_links={**loaded.branch_links, **links},
                )
            case ReadContext():
                asked = {login: self.permissions.get(login, "read") for login in need.permissions_of}
                return replace(loaded, answered=answered, now=T0 + timedelta(hours=1), permissions=asked)
            case ReadRetrospectives():
                return replace(loaded, answered=answered, retrospectives=self.retrospectives)


def drive(
    event: EventEnvelope, store: Store, *, pause: str | None = None, look_up: bool = True
) -> tuple[list[Need], Decided]:
    """Call ``decide`` until it decides, answering what it asks from ``store``."""
    loaded = Loaded()
    asked: list[Need] = []
    for _ in range(MAX_READS):
        answer = decide(event, POLICY, loaded, pause=pause, look_up_committed=look_up)
        if not isinstance(answer, NEEDS):
            return asked, answer
        assert not loaded.has(answer), f"{answer.kind} asked twice"
        asked.append(answer)
        loaded = store.answer(answer, loaded)
    raise AssertionError(f"no decision after {MAX_READS} reads: {asked}")


def agent(
    number: int, role: str = "feat-dev", status: AgentStatus = AgentStatus.ACTIVE, **fields: object
) -> AgentRecord:
    kind = {"feat-dev": RoleKind.DEV, "retrospective": RoleKind.DEV, "pr-review": RoleKind.REVIEW}[role]
    return AgentRecord.model_validate(
        {
            "agent_id": f"{REPO}-{number}-{role}",
            "role": role,
            "kind": kind,
            "repo_id": REPO,
            "repo_full_name": "octo/repo",
            "installation_id": 77,
            "issue_number": number,
            "status": status,
            "created_at": T0,
            "updated_at": T0,
            "generation_started_at": T0,
            "task_arn": "arn:task/1" if status is AgentStatus.ACTIVE else None,
            **fields,
        }
    )


# --- what decide asks for, round by round ------------------------------------------------------

# (case, the event, what the store holds, look up a committed decision?, the reads asked, in order)
READS: list[tuple[str, EventEnvelope, Store, bool, list[Need]]] = [
    (
        "an issue opened by a person: its view, then the PM and whether its author may write",
        Events().opened(38),
        Store(),
        True,
        [
            ReadDecision("(this delivery's)"),
            ReadIssues(REPO, frozenset({38})),
            ReadContext(REPO, 77, "octo/repo", pm=True, permissions_of=frozenset({"alice"})),
        ],
    ),
    (
        "a first receive does not look for a committed decision (a read saved)",
        Events().opened(38),
        Store(),
        False,
        [
            ReadIssues(REPO, frozenset({38})),
            ReadContext(REPO, 77, "octo/repo", pm=True, permissions_of=frozenset({"alice"})),
        ],
    ),
    (
        "the App's pull request: its view and branch, then the issue its branch names",
        Events().pr(101, "feat/issue-38"),
        Store(),
        False,
        [
            ReadIssues(REPO, frozenset({101}), frozenset({"feat/issue-38"})),
            ReadLinkedIssues(REPO, frozenset({38})),
            ReadContext(REPO, 77, "octo/repo"),
        ],
    ),
    (
        "a closed issue: the issues it blocks are read in the second round",
        Events().closed(42),
        Store(views={42: IssueView(42, blocks=frozenset({38, 39}))}),
        False,
        [
            ReadIssues(REPO, frozenset({42})),
            ReadLinkedIssues(REPO, frozenset({38, 39})),
            ReadContext(REPO, 77, "octo/repo"),
        ],
    ),
    (
        "an assignment of the App: the blocker graph from the issue, to the policy's depth",
        Events().assigned(38),
        Store(),
        False,
        [
            ReadIssues(REPO, frozenset({38})),
            ReadContext(
                REPO,
                77,
                "octo/repo",
                graph_from=frozenset({38}),
                graph_depth=POLICY.max_issue_depth + 1,
                permissions_of=frozenset({"alice"}),
            ),
        ],
    ),
    (
        "a comment naming the PM: the PM too, and the commenter's permission",
        Events().comment(38, "@squadron-pm what next?"),
        Store(),
        False,
        [
            ReadIssues(REPO, frozenset({38})),
            ReadContext(REPO, 77, "octo/repo", pm=True, permissions_of=frozenset({"alice"})),
        ],
    ),
]


@pytest.mark.parametrize(
    ("event", "store", "look_up", "expected"), [c[1:] for c in READS], ids=[c[0] for c in READS]
)
def test_decide_asks_for_each_read_once_in_order(
    event: EventEnvelope, store: Store, look_up: bool, expected: list[Need]
) -> None:
    asked, decided = drive(event, store, look_up=look_up)
    if look_up:
        expected = [ReadDecision(event.delivery_id), *expected[1:]]
    assert asked == expected
    assert isinstance(decided, Routed)


# --- what decide decides ------------------------------------------------------------------------

LAUNCH = LaunchAgent("1-38-feat-dev", "start", "work on #38", "1-38-feat-dev-g1-l1")
COMMENT = PostComment("octo/repo", 77, 38, "hello", "framework")


def _committed(*, done: bool) -> Decision:
    return Decision("d-1", T0, (COMMENT, LAUNCH), done=done, repo_id=REPO, repo_full_name="octo/repo")


def _finish(key: str) -> EventEnvelope:
    return command_envelope(
        FinishDecision(decision=key),
        repository={"id": REPO, "full_name": "octo/repo", "default_branch": "main"},
        installation_id=77,
        delivery_id=f"finish-{key}",
        now=T0,
        origin="reconciler",
    )


def _summary(decided: Decided) -> str:
    match decided:
        case Dropped(reason=reason):
            return f"dropped: {reason.reason}"
        case Resume(outside=outside, finish=finish):
            return f"resume {[type(e).__name__ for e in outside]} finish={finish}"
        case Routed():
            return f"routed {decided.decision.key}"


# (case, the event, what the store holds, what is decided)
DECISIONS: list[tuple[str, Callable[[], EventEnvelope], Store, str]] = [
    (
        "a committed decision left unfinished is carried out, not decided again",
        lambda: Events().comment(38),
        Store(committed=_committed(done=False)),
        "resume ['PostComment', 'LaunchAgent'] finish=True",
    ),
    (
        "a decision carried out already: only its launches are checked, unclaimed",
        lambda: Events().comment(38),
        Store(committed=_committed(done=True)),
        "resume ['LaunchAgent'] finish=False",
    ),
    (
        "the reconciler's finish of a decision that does not exist does nothing",
        lambda: _finish("d-1"),
        Store(),
        "dropped: decision d-1: no such decision",
    ),
    (
        "the reconciler's finish of a decision carried out already does nothing",
        lambda: _finish("d-1"),
        Store(committed=_committed(done=True)),
        "dropped: decision d-1: carried out already",
    ),
    (
        "the reconciler's finish of another repository's decision is refused",
        lambda: _finish("d-1"),
        Store(committed=replace(_committed(done=False), repo_id=2)),
        "dropped: decision d-1 is not of repository 1",
    ),
    (
        "the reconciler's finish of an unfinished decision carries it out",
        lambda: _finish("d-1"),
        Store(committed=_committed(done=False)),
        "resume ['PostComment', 'LaunchAgent'] finish=True",
    ),
]


@pytest.mark.parametrize(
    ("event", "store", "expected"), [c[1:] for c in DECISIONS], ids=[c[0] for c in DECISIONS]
)
def test_what_decide_decides(event: Callable[[], EventEnvelope], store: Store, expected: str) -> None:
    _, decided = drive(event(), store)
    assert _summary(decided) == expected


def test_a_finish_is_looked_up_even_on_a_first_receive() -> None:
    asked, decided = drive(_finish("d-1"), Store(committed=_committed(done=False)), look_up=False)
    assert asked == [ReadDecision("d-1")]
    assert isinstance(decided, Resume)


def test_an_assignment_decides_an_agent_and_its_launch_a_decision_done_at_once() -> None:
    """Launches alone need no sweep: the decision is done when committed, its outbox unclaimed."""
    event = Events().assigned(38)
    _, decided = drive(event, Store())
    assert isinstance(decided, Routed)
    assert decided.decision.key == event.delivery_id
    assert [type(e).__name__ for e in decided.decision.outside] == ["LaunchAgent"]
    assert decided.decision.done and not decided.finish and decided.commits
    assert decided.transitions == ("NEW>CREATED",)
    assert [e.detail_type for e in decided.domain_events] == ["agent.started.v1"]


def test_a_paused_repository_holds_back_what_starts_something_under_its_own_key() -> None:
    event = Events().assigned(38)
    _, decided = drive(event, Store(), pause="the configuration is invalid")
    assert isinstance(decided, Routed)
    assert decided.decision.key == f"{event.delivery_id}#paused"
    assert not [e for e in decided.effects if isinstance(e, LaunchAgent | PutAgent)]
    held = [e.reason for e in decided.effects if isinstance(e, Discard)]
    assert held == ["paused: the configuration is invalid; withheld LaunchAgent, PutAgent"]
    assert decided.decision.outside == () and decided.domain_events == ()


def test_nothing_is_committed_for_a_decision_of_discards() -> None:
    _, decided = drive(Events().assigned(38, to="bob"), Store(), look_up=False)
    assert isinstance(decided, Routed)
    assert not decided.commits
    assert [type(e).__name__ for e in decided.effects] == ["Discard"]


def test_a_completed_retrospective_asks_for_what_it_held_and_reports_it() -> None:
    """The retrospectives are read only when the decision completes a retrospective's agent."""
    retro = agent(50, "retrospective")
    held = RetroRecord(
        repo_id=REPO,
        repo_full_name="octo/repo",
        issue_number=50,
        window_start=T0 - timedelta(days=7),
        window_end=T0,
        trigger="schedule",
        opened_at=T0,
        pull_request=77,
    )
    store = Store(views={50: IssueView(50, agents=(retro,))}, retrospectives=(held,))
    asked, decided = drive(Events().closed(50), store, look_up=False)
    assert [need.kind for need in asked] == ["issues", "context", "retrospectives"]
    assert asked[-1] == ReadRetrospectives(REPO)
    assert isinstance(decided, Routed)
    completed = [e.data for e in decided.domain_events if e.detail_type == "retrospective.completed.v1"]
    expected = RetrospectiveCompleted(
        window_start=held.window_start, window_end=T0, proposals=0, pull_request=77
    )
    assert completed == [expected.model_dump(mode="json")]


def test_a_dev_agent_completed_asks_for_no_retrospective() -> None:
    store = Store(views={38: IssueView(38, agents=(agent(38),))})
    asked, decided = drive(Events().closed(38), store, look_up=False)
    assert [need.kind for need in asked] == ["issues", "context"]
    assert isinstance(decided, Routed)
    assert any(
        isinstance(e, PutAgent) and e.write.record.status is AgentStatus.COMPLETED for e in decided.effects
    )


def test_decide_is_the_same_for_the_same_loaded_state() -> None:
    event = Events().pr(101, "feat/issue-38")
    store = Store(views={38: IssueView(38, agents=(agent(38, branch="feat/issue-38"),))})
    first, second = drive(event, store), drive(event, store)
    assert first == second
    routed = first[1]
    assert isinstance(routed, Routed)
    assert any(isinstance(e, EvaluateMerge) for e in routed.decision.outside)


# --- the merge gate's verdict: what the router stores --------------------------------------------

GATE = EvaluateMerge("octo/repo", 77, 101, "feat-dev", 38, "d-1")

# (case, verdict, its text, the stored verdict, what it said, the choice's kind)
VERDICTS: list[tuple[str, str, str, str | None, str, str]] = [
    (
        "the same verdict saying the same: nothing stored",
        "waiting",
        "a review",
        "waiting",
        "a review",
        "keep",
    ),
    (
        "the same verdict waiting for something else: what it says",
        "waiting",
        "CI",
        "waiting",
        "a review",
        "redescribe",
    ),
    ("a first judgement: an event with no previous verdict", "waiting", "a review", None, "", "change"),
    ("a new verdict: an event from the stored one", "ready", "all clear", "waiting", "a review", "change"),
    (
        "a long text is cut where the status is: still the same",
        "waiting",
        "x" * 300,
        "waiting",
        "x" * 140,
        "keep",
    ),
]


@pytest.mark.parametrize(
    ("verdict", "text", "previous", "said", "kind"), [c[1:] for c in VERDICTS], ids=[c[0] for c in VERDICTS]
)
def test_the_merge_gates_verdict_choice(
    verdict: str, text: str, previous: str | None, said: str, kind: str
) -> None:
    choice: VerdictChoice = verdict_choice(
        GATE,
        repo_id=REPO,
        key="d-1#0",
        verdict=verdict,
        text=text,
        previous=previous,
        said=said,
        at=T0,
        correlation_id="d-1",
    )
    assert choice.kind == kind
    match choice:
        case KeepVerdict():
            pass
        case Redescribe():
            assert (choice.verdict, choice.description) == (verdict, text[:140])
        case ChangeVerdict(event=event):
            assert choice.previous == previous
            assert event.detail_type == "merge_gate.verdict_changed.v1"
            assert {k: event.data[k] for k in ("verdict", "previous", "pr_number")} == {
                "verdict": verdict,
                "previous": previous,
                "pr_number": 101,
            }
            # The same effect and verdict is the same event: a retry stores it once.
            again = verdict_choice(
                GATE,
                repo_id=REPO,
                key="d-1#0",
                verdict=verdict,
                text=text,
                previous=previous,
                said=said,
                at=T0 + timedelta(minutes=3),
                correlation_id="d-1",
            )
            assert isinstance(again, ChangeVerdict) and again.event.id == event.id


@pytest.mark.parametrize(
    ("effect", "expected"),
    [
        (GATE, {}),
        (replace(GATE, merge_group="abc123"), {"merge_group": "abc123"}),
        (replace(GATE, queue_merged=True), {"queue_merged": True}),
    ],
    ids=["no queue", "a merge group's checks", "merged by the queue"],
)
def test_the_gate_is_asked_about_the_queue_only_when_there_is_one(
    effect: EvaluateMerge, expected: dict[str, object]
) -> None:
    assert gate_arguments(effect) == expected
