"""One typed family for "the App did X" (issue 29, item 2): what each inbound message says the App
did, told apart in one place (:func:`squadron.domain.app_acts.app_act`)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pydantic import TypeAdapter

from squadron.domain.app_acts import (
    DASHBOARD_LABEL,
    AgentReported,
    AppAct,
    FrameworkCommand,
    OwnWebhook,
    app_act,
    enqueued_by_app,
    is_dashboard,
    merged_by_app,
    own_pull_request,
)
from squadron.domain.events import EventEnvelope
from tests.support.events import BOT, Events


def _from(origin: str, sender: str = "alice", source: str | None = None) -> Callable[[], EventEnvelope]:
    def build() -> EventEnvelope:
        event = Events().comment(38, by=sender)
        return event.model_copy(update={"origin": origin, "source_agent": source})

    return build


# (case, the inbound message, what the App did)
CASES: list[tuple[str, Callable[[], EventEnvelope], AppAct | None]] = [
    ("a person's webhook is no act of the App", _from("github"), None),
    ("another bot's webhook is no act of the App", _from("github", "dependabot[bot]"), None),
    ("a person whose login is the App's without [bot] is not the App", _from("github", "squadron"), None),
    ("GitHub's copy of the App's act", _from("github", BOT), OwnWebhook(login=BOT)),
    ("logins are case-insensitive", _from("github", "Squadron[bot]"), OwnWebhook(login="Squadron[bot]")),
    ("the reconciler's replay of a person's act", _from("reconciler"), None),
    ("the reconciler's replay of the App's act", _from("reconciler", BOT), OwnWebhook(login=BOT)),
    ("the framework's command", _from("squadron", BOT), FrameworkCommand()),
    (
        "a dev agent's act, through the gateway",
        _from("agent", BOT, "1-38-feat-dev"),
        AgentReported(agent_id="1-38-feat-dev", issue_number=38),
    ),
    ("the PM's act has no issue", _from("agent", BOT, "1-pm"), AgentReported(agent_id="1-pm")),
    (
        "an agent's envelope claiming a person as sender is still the agent's",
        _from("agent", "alice", "1-38-feat-dev"),
        AgentReported(agent_id="1-38-feat-dev", issue_number=38),
    ),
    (
        "an id that is no agent's names no issue",
        _from("agent", BOT, "not an id"),
        AgentReported(agent_id="not an id"),
    ),
]


@pytest.mark.parametrize(("inbound", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_what_the_app_did(inbound: Callable[[], EventEnvelope], expected: AppAct | None) -> None:
    act = app_act(inbound(), BOT)
    assert act == expected
    if act is not None:
        # One discriminated family: each act round-trips by its kind.
        adapter: TypeAdapter[AppAct] = TypeAdapter(AppAct)
        assert adapter.validate_python(adapter.dump_python(act)) == act


# --- what the App made on GitHub: each check has its home here --------------------------------

BOT_ENQUEUER = {"__typename": "Bot", "login": BOT.removesuffix("[bot]")}

MADE: list[tuple[str, Callable[[], bool], bool]] = [
    # (case, the question asked of what GitHub shows, whether the App made it)
    ("the App's PR from its branch", lambda: own_pull_request(Events().pr(101, "feat/issue-38"), BOT), True),
    (
        "the App's PR, its login in another case",
        lambda: own_pull_request(Events().pr(101, "feat/issue-38", author="Squadron[bot]"), BOT),
        True,
    ),
    (
        "a person's PR from a branch named like an agent's",
        lambda: own_pull_request(Events().pr(101, "feat/issue-38", author="mallory"), BOT),
        False,
    ),
    (
        "a fork's PR whose author field says the App",
        lambda: own_pull_request(Events().pr(101, "feat/issue-38", head_repo="mallory/repo"), BOT),
        False,
    ),
    ("the App's dashboard", lambda: is_dashboard(["squadron-dashboard"], BOT, BOT), True),
    (
        "a person's issue with the dashboard's label",
        lambda: is_dashboard([DASHBOARD_LABEL], "mallory", BOT),
        False,
    ),
    ("the App's issue without the label", lambda: is_dashboard(["bug"], BOT, BOT), False),
    ("an entry the App's bot queued", lambda: enqueued_by_app({"enqueuer": BOT_ENQUEUER}, BOT), True),
    (
        "a person whose login is the App's slug queued it",
        lambda: enqueued_by_app({"enqueuer": {**BOT_ENQUEUER, "__typename": "User"}}, BOT),
        False,
    ),
    ("an entry without its enqueuer", lambda: enqueued_by_app({}, BOT), False),
    ("a PR the App merged", lambda: merged_by_app({"merged": True, "merged_by": {"login": BOT}}, BOT), True),
    (
        "a PR a person merged",
        lambda: merged_by_app({"merged": True, "merged_by": {"login": "alice"}}, BOT),
        False,
    ),
    (
        "a closed PR that names the App but is not merged",
        lambda: merged_by_app({"merged": False, "merged_by": {"login": BOT}}, BOT),
        False,
    ),
    ("a PR without merged_by", lambda: merged_by_app({"merged": True, "merged_by": None}, BOT), False),
]


@pytest.mark.parametrize(("question", "made"), [c[1:] for c in MADE], ids=[c[0] for c in MADE])
def test_what_the_app_made(question: Callable[[], bool], made: bool) -> None:
    assert question() is made
