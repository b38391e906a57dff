"""A change set's edges, where a person or GitHub acts against the set's plan (docs/change-sets.md,
"Edges"): a member's pull request a person closes, a member GitHub's merge queue drops, a revert a
person closes, two routers telling a person at once, and a writer's approval command on an issue a
pipeline's human stage waits on.

On the GitHub sandbox (three repositories of one installation, real git) and the registry on moto,
through the real client, merge gate and DynamoDB adapter (the world of
``tests/adapters/test_change_set_merging.py``). Asserted on what GitHub and the registry show.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from squadron.adapters.github.for_router import AppGitHub
from squadron.domain.agents import ConflictError
from squadron.domain.change_sets import CHECK_NAME, SetState
from squadron.domain.event_trimming import build_envelope
from squadron.domain.events import EventEnvelope
from squadron.shell.change_set_work import ChangeSetWork
from tests.adapters.test_change_set_merging import (
    BOT,
    CLIENT,
    ORDER,
    SCHEMA,
    SERVER,
    World,
    conflict_on_main,
    world,
)

__all__ = ["world"]  # the fixture, shared with the merging tests


class Sent:
    """events.fifo as the work sees it (its hand-overs), kept."""

    def __init__(self) -> None:
        self.sent: list[EventEnvelope] = []

    def send(self, envelope: EventEnvelope) -> str:
        self.sent.append(envelope)
        return f"m-{len(self.sent)}"


def _work(w: World) -> ChangeSetWork:
    return ChangeSetWork(
        registry=w.registry, github=AppGitHub(w.app, bot_login=BOT), queue=Sent(), bot_login=BOT
    )


def _as_person(w: World, method: str, path: str, **body: Any) -> dict[str, Any]:
    answer = httpx.request(
        method, f"{w.github.base_url}{path}", json=body, headers={"authorization": "token human:octo-admin"}
    )
    assert answer.is_success, answer.text
    return dict(answer.json())


def _delivered(w: World, event: str, action: str, repo: str) -> EventEnvelope:
    """The last webhook ``event`` ``action`` of ``repo`` the sandbox sent, as the router reads it."""
    found = [
        d
        for d in w.github.deliveries
        if d.event == event and d.action == action and d.payload["repository"]["full_name"] == repo
    ]
    assert found, f"no {event}.{action} of {repo}"
    return build_envelope(
        event=event, delivery_id=found[-1].guid, payload=found[-1].payload, received_at=datetime.now(UTC)
    )


def _check_on(w: World, repo: str, number: int) -> tuple[str, str]:
    pr = w.pull(repo, number)
    statuses = w.client(repo).get_combined_status(pr["head"]["sha"])["statuses"]
    (status,) = [s for s in statuses if s["context"] == CHECK_NAME]
    return status["state"], status["description"]


# --- a member's pull request closed by a person -------------------------------------------------


def test_a_member_pull_request_a_person_closes_leaves_the_set_and_a_reopened_one_is_picked_up(
    world: World,
) -> None:
    made = world.ready_set()
    work = _work(world)
    number = made.member(SERVER).pr_number
    assert number is not None
    _as_person(world, "PATCH", f"/repos/{SERVER}/pulls/{number}", state="closed")
    work.pull_request(_delivered(world, "pull_request", "closed", SERVER))
    dropped = world.stored(made.id)
    assert dropped.state is SetState.WORKING  # not ready: merging never starts on a closed member
    assert dropped.member(SERVER).pr_number is None and dropped.member(SERVER).gate is None
    state, said = _check_on(world, SCHEMA, made.member(SCHEMA).pr_number or 0)
    assert state == "pending" and SERVER in said  # the combined check says whom it waits for
    assert world.merger().on_ready(dropped) == world.stored(made.id)  # nothing merges
    assert not any(world.pull(n, made.member(n).pr_number)["merged"] for n in (SCHEMA, CLIENT))
    # the webhook again: nothing more
    work.pull_request(_delivered(world, "pull_request", "closed", SERVER))
    assert world.stored(made.id).version == dropped.version
    # a person reopens it: the App's pull request from the set's branch is the member again
    _as_person(world, "PATCH", f"/repos/{SERVER}/pulls/{number}", state="open")
    work.pull_request(_delivered(world, "pull_request", "reopened", SERVER))
    assert world.stored(made.id).member(SERVER).pr_number == number


def test_a_closed_member_webhook_of_a_pull_request_still_open_drops_nothing(world: World) -> None:
    made = world.ready_set()
    number = made.member(SERVER).pr_number
    _as_person(world, "PATCH", f"/repos/{SERVER}/pulls/{number}", state="closed")
    closed = _delivered(world, "pull_request", "closed", SERVER)
    _as_person(world, "PATCH", f"/repos/{SERVER}/pulls/{number}", state="open")  # reopened meanwhile
    _work(world).pull_request(closed)  # the late webhook is a nudge: GitHub shows it open
    assert world.stored(made.id).state is SetState.READY


# --- a member dropped from its merge queue ------------------------------------------------------


def test_a_member_its_merge_queue_drops_fails_the_set_which_reverts_and_tells_a_person(world: World) -> None:
    world.queue_required(SERVER)
    made = world.ready_set()
    world.client(SERVER).create_status(made.member(SERVER).head_sha or "", state="success", context="ci")
    merger = world.merger()
    waiting = merger.on_ready(made)
    assert waiting is not None and waiting.state is SetState.MERGING and waiting.member(SCHEMA).merged
    (entry,) = world.github.repos[SERVER].queue
    # the merge group fails its required check: GitHub's queue takes the pull request out
    world.client(SERVER).create_status(entry["group"]["head_sha"], state="failure", context="ci")
    assert world.github.repos[SERVER].queue == []
    dropped = _delivered(world, "merge_group", "destroyed", SERVER)
    assert dropped.merge_group is not None and dropped.merge_group.reason == "dequeued"
    summary = merger.after_routing(dropped)
    assert summary == {"change_set": {"id": made.id, "state": "reverting"}}
    after = world.stored(made.id)
    assert after.state is SetState.REVERTING and "merge queue" in (after.failure or "")
    assert not world.pull(SERVER, made.member(SERVER).pr_number)["merged"]
    assert [len(world.reverts(n)) for n in ORDER] == [1, 0, 0]  # the schema's merge is reverted
    assert world.github.repos[SERVER].queue == []  # never queued again
    (escalation,) = world.escalations()
    assert SERVER in escalation and "@octo-leads" in escalation
    assert merger.after_routing(dropped) == {}  # the webhook again: the set is no longer merging it
    assert len(world.escalations()) == 1 and [len(world.reverts(n)) for n in ORDER] == [1, 0, 0]


def test_a_dequeued_webhook_of_a_member_queued_again_fails_nothing(world: World) -> None:
    world.queue_required(SERVER)
    made = world.ready_set()
    world.client(SERVER).create_status(made.member(SERVER).head_sha or "", state="success", context="ci")
    merger = world.merger()
    merger.on_ready(made)
    assert len(world.github.repos[SERVER].queue) == 1
    number = made.member(SERVER).pr_number or 0
    assert merger.on_dequeued(SERVER, number) == world.stored(made.id)  # still queued: a forged nudge
    assert merger.on_dequeued(CLIENT, made.member(CLIENT).pr_number or 0) is None  # not the one merging
    assert world.stored(made.id).state is SetState.MERGING and world.escalations() == []


# --- a revert closed by a person ----------------------------------------------------------------


def test_a_revert_a_person_closes_escalates_the_set_once_instead_of_reverting_forever(world: World) -> None:
    made = world.ready_set()
    conflict_on_main(world, CLIENT)
    merger = world.merger()
    reverting = merger.on_ready(made)
    assert reverting is not None and reverting.state is SetState.REVERTING
    revert = reverting.member(SERVER).revert_pr
    _as_person(world, "PATCH", f"/repos/{SERVER}/pulls/{revert}", state="closed")
    closed = _delivered(world, "pull_request", "closed", SERVER)
    assert merger.after_routing(closed) == {"change_set": {"id": made.id, "state": "escalated"}}
    after = world.stored(made.id)
    assert after.state is SetState.ESCALATED and f"{SERVER}#{revert}" in (after.failure or "")
    said = [
        c["body"]
        for c in world.github.repos[SCHEMA].comments.get(5, [])
        if "closed without merging" in c["body"]
    ]
    assert len(said) == 1 and f"{SERVER}#{revert}" in said[0] and "@octo-leads" in said[0]
    assert world.events(made.id)[-1] == "change_set.escalated"
    for _ in range(2):  # the webhook again, a sweep: nothing more is said, the set is over
        merger.after_routing(closed)
        assert merger.sweep() == []
    assert (
        len(
            [
                c
                for c in world.github.repos[SCHEMA].comments.get(5, [])
                if "closed without merging" in c["body"]
            ]
        )
        == 1
    )


# --- two routers telling a person at once -------------------------------------------------------


def test_two_routers_telling_a_person_at_once_post_one_escalation(world: World) -> None:
    made = world.ready_set()
    conflict_on_main(world, CLIENT)
    first, second = world.merger(), world.merger()
    github = first.github
    looked = github.find_comment
    raced: list[str] = []

    def racing(*args: Any) -> bool:
        seen = looked(*args)  # nothing posted yet, as the first router sees it
        if not raced:
            raced.append("second")
            try:
                second.step(made.id)  # the second router reaches the same telling now
            except ConflictError as exc:
                raced.append(str(exc))
        return seen

    first.github = _Looking(github, racing)
    after = first.on_ready(made)
    assert raced and after is not None and after.state is SetState.REVERTING
    assert len(world.escalations()) == 1
    assert second.step(made.id) == world.stored(made.id)  # later: told already, nothing more
    assert len(world.escalations()) == 1


class _Looking:
    """The App's GitHub with its comment lookup replaced."""

    def __init__(self, inner: Any, find: Any) -> None:
        self._inner, self.find_comment = inner, find

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_a_claim_left_by_a_router_that_died_is_taken_over(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = world.ready_set()
    conflict_on_main(world, CLIENT)
    merger = world.merger()
    comment = merger.github.comment

    def dying(*args: Any, **kwargs: Any) -> None:
        raise _Died

    monkeypatch.setattr(merger.github, "comment", dying)
    with pytest.raises(_Died):
        merger.on_ready(made)
    assert world.escalations() == [] and world.stored(made.id).state is SetState.FAILED
    with pytest.raises(ConflictError):  # a moment later: the claim holds
        world.merger().step(made.id)
    monkeypatch.setattr(merger.github, "comment", comment)
    later = world.merger()
    later.clock = lambda: datetime.now(UTC) + timedelta(minutes=3)  # past the claim's TELLING
    after = later.step(made.id)
    assert after is not None and after.state is SetState.REVERTING and len(world.escalations()) == 1


class _Died(Exception):
    """The router's Lambda ended after it claimed the telling."""
