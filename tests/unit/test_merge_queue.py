"""GitHub's merge queue, the pure part: the gate's step, whose entry it is, a group's branch,
the webhooks' envelope, the ingress and the routing table."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from squadron.domain.agents import AgentStatus
from squadron.domain.app_acts import enqueued_by_app
from squadron.domain.effects import Discard, EvaluateMerge, apply_order
from squadron.domain.event_trimming import build_envelope
from squadron.domain.events import EventEnvelope
from squadron.domain.merge_queue import (
    group_of,
    group_statuses,
    is_queue_refusal,
    queue_step,
    requires_queue,
)
from squadron.domain.routed import performed_by_app
from tests.support.events import summarize
from tests.support.webhook_examples import example
from tests.support.world import World

BOT = "squadron[bot]"
HEAD = "a" * 40
OTHER = "b" * 40
NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


def entry(login: str, typename: str = "Bot", head: str = HEAD) -> dict[str, Any]:
    return {"id": "MQE_1", "enqueuer": {"__typename": typename, "login": login}, "headCommit": {"oid": head}}


OURS = entry("squadron")
THEIRS = entry("alice", "User")

STEPS = [
    # (id, merge?, entry, step)
    ("merge, not queued: enqueue", True, None, "enqueue"),
    ("merge, ours at the judged head: nothing to send", True, OURS, "queued"),
    ("merge, a person's at the judged head: it is queued", True, THEIRS, "queued"),
    ("merge, ours at an older head: out, then in again", True, entry("squadron", head=OTHER), "dequeue"),
    ("merge, a person's at an older head: theirs", True, entry("alice", "User", head=OTHER), "leave"),
    ("no merge, ours: the gate broke, out", False, OURS, "dequeue"),
    ("no merge, a person's: never ours to take out", False, THEIRS, "leave"),
    ("no merge, not queued: nothing", False, None, "nothing"),
]


@pytest.mark.parametrize(("merge", "found", "step"), [s[1:] for s in STEPS], ids=[s[0] for s in STEPS])
def test_the_gates_step_on_a_queued_branch(merge: bool, found: dict[str, Any] | None, step: str) -> None:
    assert queue_step(merge=merge, entry=found, head_sha=HEAD, bot_login=BOT) == step


ENQUEUERS = [
    ("the App's bot, as GraphQL names it", {"__typename": "Bot", "login": "squadron"}, True),
    ("the App's bot, as REST names it", {"__typename": "Bot", "login": "squadron[bot]"}, True),
    ("logins are case-insensitive", {"__typename": "Bot", "login": "Squadron"}, True),
    ("a person whose login is the App's slug", {"__typename": "User", "login": "squadron"}, False),
    ("another App's bot", {"__typename": "Bot", "login": "squadron-ci"}, False),
    ("a person", {"__typename": "User", "login": "alice"}, False),
    ("no type said", {"login": "squadron"}, False),
    ("nobody", None, False),
]


@pytest.mark.parametrize(("enqueuer", "ours"), [e[1:] for e in ENQUEUERS], ids=[e[0] for e in ENQUEUERS])
def test_only_the_apps_bot_made_an_entry_the_app_may_take_out(enqueuer: object, ours: bool) -> None:
    assert enqueued_by_app({"enqueuer": enqueuer}, BOT) is ours


REFS = [
    ("GitHub's example", f"refs/heads/gh-readonly-queue/main/pr-104-{HEAD}", ("main", 104, HEAD)),
    (
        "a base with slashes",
        f"refs/heads/gh-readonly-queue/release/1.x/pr-7-{HEAD}",
        ("release/1.x", 7, HEAD),
    ),
    ("without refs/heads", f"gh-readonly-queue/main/pr-7-{HEAD}", ("main", 7, HEAD)),
    ("not a queue branch", f"refs/heads/feat/pr-7-{HEAD}", None),
    ("number zero", f"refs/heads/gh-readonly-queue/main/pr-0-{HEAD}", None),
    ("short sha", "refs/heads/gh-readonly-queue/main/pr-7-abc", None),
    ("upper-case sha", f"refs/heads/gh-readonly-queue/main/pr-7-{HEAD.upper()}", None),
]


@pytest.mark.parametrize(("ref", "named"), [r[1:] for r in REFS], ids=[r[0] for r in REFS])
def test_a_merge_groups_branch_names_its_pull_request(ref: str, named: object) -> None:
    assert group_of(ref) == named


@pytest.mark.parametrize(
    ("status", "message", "queue"),
    [
        (405, "Changes must be made through the merge queue", True),
        (405, "Pull Request is not mergeable", False),
        (409, "Changes must be made through the merge queue", False),
    ],
)
def test_the_rest_merges_refusal_that_means_the_queue(status: int, message: str, queue: bool) -> None:
    assert is_queue_refusal(status, message) is queue


def test_a_branchs_rules_require_the_queue() -> None:
    assert requires_queue([{"type": "pull_request"}, {"type": "merge_queue", "parameters": {}}])
    assert not requires_queue([{"type": "required_status_checks"}])
    assert not requires_queue([])


def test_a_groups_head_gets_squadrons_statuses_and_the_fresh_verdict() -> None:
    head = [
        {"context": "squadron/pr-review", "state": "success", "description": "ok"},
        {"context": "squadron/merge", "state": "pending", "description": "old verdict"},
        {"context": "ci", "state": "success"},  # CI reports on the group itself
    ]
    assert group_statuses(head, verdict_state="success", verdict="ready") == [
        ("squadron/merge", "success", "ready"),
        ("squadron/pr-review", "success", "ok"),
    ]


def _payload(action: str, reason: str | None = None, sender: str = BOT, number: int = 50) -> dict[str, Any]:
    body = example("merge_group", "checks_requested")
    body["action"] = action
    body["merge_group"]["head_ref"] = f"refs/heads/gh-readonly-queue/main/pr-{number}-{HEAD}"
    body["sender"] = {"login": sender, "id": 1, "type": "Bot" if sender.endswith("[bot]") else "User"}
    if reason is not None:
        body["reason"] = reason
    return body


INGRESS = [
    # (id, action, reason, sender, the App's own?)
    ("checks requested of a group the App queued", "checks_requested", None, BOT, False),
    ("a group merged, the App named as sender", "destroyed", "merged", BOT, False),
    ("a group invalidated", "destroyed", "invalidated", BOT, False),
    ("the App took its entry out itself", "destroyed", "dequeued", BOT, True),
    ("the queue took it out (a failed check)", "destroyed", "dequeued", "github-merge-queue[bot]", False),
]


@pytest.mark.parametrize(
    ("action", "reason", "sender", "own"), [i[1:] for i in INGRESS], ids=[i[0] for i in INGRESS]
)
def test_the_ingress_drops_only_the_apps_own_dequeue(
    action: str, reason: str | None, sender: str, own: bool
) -> None:
    body = _payload(action, reason, sender)
    assert performed_by_app("merge_group", action, body, app_id=1, app_slug="squadron") is own


def test_a_merge_group_webhook_becomes_an_envelope_in_its_pull_requests_group() -> None:
    envelope = build_envelope(
        event="merge_group", delivery_id="d-1", payload=_payload("destroyed", "dequeued"), received_at=NOW
    )
    group = envelope.merge_group
    assert group is not None
    assert (group.pr_number, group.pr_head_sha, group.reason, group.base_ref) == (
        50,
        HEAD,
        "dequeued",
        "refs/heads/main",
    )
    assert envelope.message_group_id.endswith("#50")  # ordered with the pull request's own events


A38 = "1-38-feat-dev"


def _group(world: World, action: str, reason: str | None = None, number: int = 50) -> EventEnvelope:
    events = world.events
    return events._base(
        "merge_group",
        action,
        sender="github-merge-queue[bot]",
        merge_group={
            "head_sha": OTHER,
            "head_ref": f"refs/heads/gh-readonly-queue/main/pr-{number}-{HEAD}",
            "base_ref": "refs/heads/main",
            "reason": reason,
            "pr_number": number,
            "pr_head_sha": HEAD,
        },
    )


ROUTES = [
    # (id, action, reason, effects in apply order, the gate's merge_group / queue_merged)
    (
        "checks requested: the gate posts on the group",
        "checks_requested",
        None,
        ["gate PR #50"],
        (OTHER, False),
    ),
    ("merged by the queue: the gate follows up", "destroyed", "merged", ["gate PR #50"], (None, True)),
    (
        "a failed group wakes the dev agent",
        "destroyed",
        "dequeued",
        [f"inbox {A38} check_failed", f"put {A38} CREATED (v4)"],
        None,
    ),
    ("an invalidated group is rebuilt by GitHub", "destroyed", "invalidated", ["discard"], None),
]


@pytest.mark.parametrize(
    ("action", "reason", "said", "gate"), [r[1:] for r in ROUTES], ids=[r[0] for r in ROUTES]
)
def test_merge_group_routing(action: str, reason: str | None, said: list[str], gate: object) -> None:
    world = World()
    world.send(world.events.assigned(38))
    world.send(world.events.pr(50, "feat/issue-38"))
    effects = apply_order(world.send(_group(world, action, reason)))
    assert summarize(effects) == said
    judged = [(e.merge_group, e.queue_merged) for e in effects if isinstance(e, EvaluateMerge)]
    assert judged == ([gate] if gate is not None else [])
    if reason == "dequeued":
        (told,) = world.registry.pending_inbox(A38)
        assert told.summary.startswith("the merge queue took PR #50 out: its merge group bbbbbbb failed")


def test_a_failed_group_wakes_an_idle_dev_agent_once() -> None:
    world = World()
    world.send(world.events.assigned(38))
    world.send(world.events.pr(50, "feat/issue-38"))
    record = world.agent(A38).transition(AgentStatus.ACTIVE, now=world.agent(A38).updated_at)
    world.registry.agents[A38] = record.updated(now=record.updated_at, task_arn=None)  # idle
    failed = _group(world, "destroyed", "dequeued")
    assert world.say(failed) == [f"inbox {A38} check_failed", f"put {A38} ACTIVE (v6)", f"launch {A38} wake"]
    assert world.agent(A38).counters.ci_failures == 1
    assert world.say(failed) == []  # delivered again: nothing new
    assert world.agent(A38).counters.ci_failures == 1


def test_a_failed_group_of_a_pull_request_no_agent_owns_wakes_nobody() -> None:
    world = World()
    effects = world.send(_group(world, "destroyed", "dequeued", number=77))
    assert all(isinstance(e, Discard) for e in effects)
