"""A pipeline's human stage, pure (:mod:`squadron.domain.pipelines.humans`): which events are an
act a stage may wait for, who counts toward a wait (a member of its group with write access, each
person once; never the App, a bot, the framework or an agent's report), what is said on entry."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import TypeAdapter

from squadron.domain.effects import AssignIssue, PostComment
from squadron.domain.events import EventEnvelope
from squadron.domain.pipeline_wire import PipelineTask
from squadron.domain.pipelines.humans import (
    HumanAct,
    HumanWait,
    answer_of,
    counted,
    entered,
    extended,
    human_act,
    needs_permission,
    refusal,
    satisfied,
)
from squadron.domain.pipelines.models import HumanStage
from tests.support.events import BOT, Events, agent_did

T0 = datetime(2026, 11, 28, 5, 0, tzinfo=UTC)
E = Events()


def wait(**changes: Any) -> HumanWait:
    base = HumanWait(
        repo_id=1,
        number=7,
        entry="e1",
        execution_arn="arn:aws:states:us-east-1:123456789012:execution:sq_1-p:run-1",
        pipeline="p",
        stage="ask",
        task_token="t",
        wait_for="approval",
        group="maintainers",
        members=("alice", "Bob"),
        count=1,
        opened_at=T0,
    )
    return base.model_copy(update=changes)


def own(event: EventEnvelope) -> EventEnvelope:
    """GitHub's copy of what the App did (its own webhook)."""
    return event.model_copy(update={"sender": event.sender.model_copy(update={"login": BOT, "type": "Bot"})})


def framework(event: EventEnvelope) -> EventEnvelope:
    return event.model_copy(update={"origin": "squadron"})


# --- which events are an act, of what kind, by whom ----------------------------------------------

ACTS: list[tuple[str, EventEnvelope, tuple[str, str] | None]] = [
    ("an approval", E.review(7, "feat/x", "approved", by="alice"), ("approval", "alice")),
    (
        "an approval spelt as GitHub's webhook does",
        E.review(7, "feat/x", "APPROVED", by="alice"),
        ("approval", "alice"),
    ),
    ("changes requested is no approval", E.review(7, "feat/x", "changes_requested", by="alice"), None),
    ("a review comment is no approval", E.review(7, "feat/x", "commented", by="alice"), None),
    ("a comment, by its author", E.comment(7, "lgtm", by="alice"), ("comment", "alice")),
    ("an edited comment is not a new one", E.comment(7, "lgtm", by="alice", action="edited"), None),
    ("a label, by who added it", E.labeled(7, "ship-it", by="alice"), ("label", "alice")),
    (
        "a review dismissed, by who dismissed it",
        E.review(7, "feat/x", "dismissed", by="carol", action="dismissed", sender="alice"),
        ("dismiss", "alice"),
    ),
    ("an issue opened", E.opened(7), None),
    ("an issue edited", E.edited(7), None),
]


@pytest.mark.parametrize(("case", "event", "expected"), ACTS, ids=[c for c, _, _ in ACTS])
def test_which_events_are_an_act(case: str, event: EventEnvelope, expected: tuple[str, str] | None) -> None:
    act = human_act(event)
    assert (None if act is None else (act.wait_for, act.login)) == expected
    if act is not None:
        assert act.number == 7


# --- who counts -------------------------------------------------------------------------------

PERMISSIONS = {"alice": "write", "Bob": "admin", "carol": "read", "dave": "write", "renovate[bot]": "write"}

WHO: list[tuple[str, HumanWait, EventEnvelope, str | None]] = [
    ("a member with write access approves", wait(), E.review(7, "feat/x", "approved", by="alice"), None),
    ("logins are case-insensitive", wait(), E.review(7, "feat/x", "approved", by="bob"), None),
    (
        "a writer outside the group",
        wait(),
        E.review(7, "feat/x", "approved", by="dave"),
        "dave is not a member of the human group 'maintainers'",
    ),
    (
        "a member without write access",
        wait(members=("alice", "carol")),
        E.review(7, "feat/x", "approved", by="carol"),
        "carol has no write access (read)",
    ),
    (
        "a stranger's comment",
        wait(wait_for="comment"),
        E.comment(7, "approved!", by="mallory"),
        "mallory is not a member of the human group 'maintainers'",
    ),
    (
        "a stranger's comment, no group: anyone with write access",
        wait(wait_for="comment", group=None, members=()),
        E.comment(7, "approved!", by="mallory"),
        "mallory has no write access (read)",
    ),
    (
        "a writer's comment, no group",
        wait(wait_for="comment", group=None, members=()),
        E.comment(7, "ok", by="dave"),
        None,
    ),
    (
        "a bot, even a member with write access",
        wait(wait_for="comment", members=("renovate[bot]",)),
        E.comment(7, "ok", by="renovate[bot]"),
        "renovate[bot] is a bot",
    ),
    (
        "the App's own webhook",
        wait(wait_for="label", group=None, members=()),
        own(E.labeled(7, "ship-it", by="alice")),
        f"{BOT} is the App itself",
    ),
    (
        "a member's group named the App",
        wait(wait_for="comment", members=(BOT,)),
        E.comment(7, "ok", by=BOT),
        f"{BOT} is the App itself",
    ),
    (
        "the framework's own message",
        wait(wait_for="label"),
        framework(E.labeled(7, "ship-it", by="alice")),
        "not an act of a person on #7",
    ),
    (
        "an agent's review, as its task reports it",
        wait(),
        agent_did(E.review(7, "feat/x", "approved", by=BOT), "1-7-pr-review"),
        "not an act of a person on #7",
    ),
    (
        "another issue's approval",
        wait(),
        E.review(8, "feat/x", "approved", by="alice"),
        "not an act of a person on #7",
    ),
    (
        "a comment does not answer a wait for an approval",
        wait(),
        E.comment(7, "approve", by="alice"),
        "stage 'ask' waits for an approval, not a comment",
    ),
    (
        "an approval does not answer a wait for a dismissal",
        wait(wait_for="dismiss"),
        E.review(7, "feat/x", "approved", by="alice"),
        "stage 'ask' waits for a review dismissed, not an approval",
    ),
    (
        "a member dismisses a review",
        wait(wait_for="dismiss"),
        E.review(7, "feat/x", "dismissed", by="mallory", action="dismissed", sender="alice"),
        None,
    ),
    (
        "the reconciler's copy of a missed approval",
        wait(),
        E.review(7, "feat/x", "approved", by="alice").model_copy(update={"origin": "reconciler"}),
        None,
    ),
]


@pytest.mark.parametrize(("case", "held", "event", "why"), WHO, ids=[c for c, _, _, _ in WHO])
def test_who_counts(case: str, held: HumanWait, event: EventEnvelope, why: str | None) -> None:
    act = human_act(event)
    if act is None:  # an agent's report is the framework's command, no person's act at all
        assert why is not None and event.origin == "agent"
        return
    known = {login.casefold(): role for login, role in PERMISSIONS.items()}  # GitHub: case-insensitive
    asked = known.get(act.login.casefold(), "read") if needs_permission(held, act, BOT) else None
    assert refusal(held, act, bot_login=BOT, permission=asked) == why
    if not needs_permission(held, act, BOT):  # GitHub is asked only for a person the rest lets through
        assert why is not None


def test_an_unknown_permission_never_counts() -> None:
    act = HumanAct("approval", "alice", False, 7)
    assert refusal(wait(), act, bot_login=BOT, permission=None) == "alice has no write access (unknown)"


def test_each_person_counts_once_until_the_count() -> None:
    two = wait(count=2)
    once = two.model_copy(update={"counted": counted(two, "alice")})
    again = once.model_copy(update={"counted": counted(once, "ALICE")})  # the same person, redelivered
    assert once.counted == again.counted == ("alice",) and not satisfied(again)
    both = again.model_copy(update={"counted": counted(again, "Bob")})
    assert satisfied(both)
    assert answer_of(both).output == {"wait_for": "approval", "from": "maintainers", "by": ["alice", "Bob"]}


# --- on entry -----------------------------------------------------------------------------------

_STAGE = TypeAdapter(HumanStage)


def task(config: dict[str, Any], number: int | None = 7) -> PipelineTask:
    return PipelineTask.model_validate(
        {
            "repository_id": 1,
            "issue_number": number,
            "pipeline": "p",
            "definition": "a" * 16,
            "execution_arn": "arn:aws:states:us-east-1:123456789012:execution:sq_1-p:run-1",
            "stage": "ask",
            "stage_type": "human",
            "entered_at": T0,
            "task_token": "token-1",
            "input": {"trigger": {"number": number}, "context": {"team": "core"}, "stages": {}},
            "config": json.dumps(config),
        }
    )


GROUPS = {"maintainers": ("alice", "Bob"), "others": ("zed",)}

ENTRIES: list[tuple[str, dict[str, Any], list[str], tuple[str, ...] | None]] = [
    (
        "notify on enter, assign the group",
        {"description": "Ship it?", "from": "maintainers", "notify": {"on_enter": "Team {{ context.team }}"}},
        [
            "Pipeline `p`: stage `ask` waits for an approval from the human group `maintainers` (@alice, @Bob).",
            "Ship it?",
            "Team core",
        ],
        ("alice", "Bob"),
    ),
    (
        "two comments from anyone with write access, no assignment",
        {"wait_for": "comment", "count": 2, "notify": {"on_enter": "please"}},
        [
            "Pipeline `p`: stage `ask` waits for 2 comments (each by another person) from someone with "
            "write access.",
            "please",
        ],
        None,
    ),
    ("no on_enter: nothing said", {"from": "maintainers"}, [], ("alice", "Bob")),
    ("auto_assign off", {"from": "maintainers", "auto_assign": False}, [], None),
]


@pytest.mark.parametrize(("case", "human", "said", "assigned"), ENTRIES, ids=[c for c, _, _, _ in ENTRIES])
def test_what_is_said_and_kept_on_entry(
    case: str, human: dict[str, Any], said: list[str], assigned: tuple[str, ...] | None
) -> None:
    config = {"id": "ask", "type": "human", "human": human}
    got = entered(
        task(config),
        _STAGE.validate_python(config),
        repo_full_name="octo/repo",
        installation_id=77,
        groups=GROUPS,
        now=T0,
    )
    comments = [e for e in got.effects if isinstance(e, PostComment)]
    assigns = [e for e in got.effects if isinstance(e, AssignIssue)]
    assert [c.body.split("\n\n") for c in comments] == ([said] if said else [])
    assert [a.logins for a in assigns] == ([assigned] if assigned else [])
    assert len(got.effects) == len(comments) + len(assigns)
    assert {c.number for c in comments} | {a.number for a in assigns} <= {7}
    w = got.wait
    assert (w.entry, w.task_token, w.number, w.opened_at) == (task(config).entry, "token-1", 7, T0)
    assert w.wait_for == human.get("wait_for", "approval") and w.count == human.get("count", 1)
    assert w.group == human.get("from") and w.members == GROUPS.get(human.get("from", ""), ())


# --- which open wait an entry of the stage continues ---------------------------------------------

OTHER_RUN = "arn:aws:states:us-east-1:123456789012:execution:sq_1-p:run-2"
EXTENDED: list[tuple[str, list[HumanWait], str | None]] = [
    ("the stage's first entry continues nothing", [], None),
    ("an entry that timed out, unanswered", [wait()], "e1"),
    (
        "an entry whose answer came after its timeout (gone)",
        [wait(answer={"by": ["alice"]}, gone=True)],
        "e1",
    ),
    ("an answered entry, not yet sent: a loop back starts afresh", [wait(answer={"by": ["alice"]})], None),
    ("another run's wait", [wait(execution_arn=OTHER_RUN)], None),
    ("another stage's wait", [wait(stage="sign")], None),
    ("the newest of two", [wait(), wait(entry="e2", gone=True, answer={"by": ["Bob"]})], "e2"),
]


@pytest.mark.parametrize(("waits", "found"), [c[1:] for c in EXTENDED], ids=[c[0] for c in EXTENDED])
def test_which_wait_an_entry_extends(waits: list[HumanWait], found: str | None) -> None:
    extension = task({"id": "ask", "type": "human", "human": {"from": "maintainers"}})
    held = extended(extension, waits)
    assert (held.entry if held is not None else None) == found
