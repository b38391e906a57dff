"""What working a change set writes and whom it believes (squadron.domain.change_set_steps), and the
router putting a member issue's dev agent on the set's branch — played by the attacker: a person's
issue carrying the member marker, a fork's or a stranger's pull request from the set's branch."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from squadron.domain import change_sets as cs
from squadron.domain.change_set_steps import (
    SET_MERGES,
    WAITS_FOR_SET,
    held_merge_status,
    marked_set,
    member_issue_body,
    member_marker,
    member_pull_request,
    posted_version,
    pushed_notice,
    set_branch_of_issue,
    set_of_branch,
    versioned_check,
)
from squadron.domain.change_sets import CHECK_DESCRIPTION_LENGTH, CHECK_NAME, ChangeSet, SetState
from squadron.domain.commands import AgentAssignedIssue
from squadron.domain.event_fields import IssueFields
from squadron.domain.events import EventEnvelope, command_envelope
from tests.support.events import BOT
from tests.support.world import World

T0 = datetime(2026, 11, 28, 5, 0, tzinfo=UTC)
REPOS = {"octo/schema": 11, "octo/server": 12, "octo/client": 13}
SET_ID = cs.change_set_id(77, 11, 5, "p")


def working(**gates: Any) -> ChangeSet:
    proposed = cs.propose(
        set_id=SET_ID,
        installation_id=77,
        origin="octo/schema",
        issue=5,
        repositories=("octo/server", "octo/client"),
        dependencies=(("octo/server", "octo/schema"),),
        installation_repositories=REPOS,
        proposed_by="11-pm",
        open_sets=0,
        at=T0,
    )
    approved, _ = cs.approve(proposed, "alice", dict.fromkeys(REPOS, "write"), T0)
    step = cs.start_work(approved, T0)
    for number, (repo, verdict) in enumerate(gates.items(), start=2):
        name = f"octo/{repo}"
        step = cs.record_pull_request(step, name, number, T0)
        step = cs.record_gate(step, name, verdict, T0)
    return step


# --- the member issue and its marker ------------------------------------------------------------


def test_the_member_issue_is_the_frameworks_words_with_its_marker() -> None:
    body = member_issue_body(working(), "octo/server")
    assert marked_set(body) == SET_ID
    assert f"change-set/{SET_ID}" in body and "https://github.com/octo/schema/issues/5" in body
    assert "octo/schema`, `octo/server`, `octo/client" in body  # the merge order
    with pytest.raises(cs.ChangeSetRefusedError, match="origin issue itself"):
        member_issue_body(working(), "octo/schema")


@pytest.mark.parametrize(
    ("body", "framework", "author", "branch"),
    [
        (member_marker(SET_ID), True, None, f"change-set/{SET_ID}"),  # the framework's command
        (f"the App's issue\n\n{member_marker(SET_ID)}", False, BOT, f"change-set/{SET_ID}"),
        (member_marker(SET_ID), False, "mallory", None),  # a person's issue copying the marker
        (member_marker(SET_ID), False, None, None),
        (member_marker(SET_ID).replace("<!--", "&lt;!--"), False, BOT, None),  # an agent's, made inert
        ("no marker", True, None, None),
        ("<!-- squadron:change-set cs-xyz -->", True, None, None),  # not a set's id
    ],
)
def test_only_the_frameworks_marker_chooses_the_sets_branch(
    body: str, framework: bool, author: str | None, branch: str | None
) -> None:
    assert set_branch_of_issue(body, framework=framework, author=author, bot_login=BOT) == branch


def _assigned(world: World, number: int, body: str, *, author: str, framework: bool) -> EventEnvelope:
    if framework:
        issue = IssueFields(number=number, title="t", body=body, state="open", author=author)
        return command_envelope(
            AgentAssignedIssue(issue=issue),
            repository={"id": 1, "full_name": "octo/repo", "default_branch": "main"},
            installation_id=77,
            delivery_id=f"cmd-{number}",
            now=T0,
        )
    issue_json = {
        "number": number,
        "title": "t",
        "state": "open",
        "labels": [],
        "author": author,
        "body": body,
    }
    return world.events._base(
        "issues",
        "assigned",
        sender="alice",
        issue=issue_json,
        assignee={"login": BOT, "id": 5, "type": "Bot"},
    )


@pytest.mark.parametrize(
    ("author", "framework", "branch"),
    [
        (BOT, True, f"change-set/{SET_ID}"),  # the set's hand-over of its member issue
        (BOT, False, f"change-set/{SET_ID}"),  # a writer assigning the App's member issue again
        ("alice", False, "feat/issue-{n}"),  # a writer's own issue quoting the marker
        ("mallory", False, "feat/issue-{n}"),  # a stranger's issue, assigned by a writer
    ],
)
def test_the_router_puts_a_member_issues_dev_agent_on_the_sets_branch(
    author: str, framework: bool, branch: str
) -> None:
    world = World()
    world.send(_assigned(world, 7, f"text\n\n{member_marker(SET_ID)}", author=author, framework=framework))
    [agent] = [a for a in world.registry.agents.values() if a.issue_number == 7]
    assert agent.branch == branch.format(n=7)


# --- whose pull request is a member's --------------------------------------------------------------


@pytest.mark.parametrize(
    ("author", "head_ref", "head_repo", "repository", "member"),
    [
        (BOT, f"change-set/{SET_ID}", "octo/server", "octo/server", True),
        (BOT, f"change-set/{SET_ID}", "mallory/server", "octo/server", False),  # a fork's same branch
        ("mallory", f"change-set/{SET_ID}", "octo/server", "octo/server", False),  # a person's
        (BOT, "feat/issue-3", "octo/server", "octo/server", False),
        (BOT, f"change-set/{SET_ID}", "octo/other", "octo/other", False),  # not in the set
        (None, f"change-set/{SET_ID}", "octo/server", "octo/server", False),
    ],
)
def test_only_the_apps_pull_request_from_the_sets_branch_of_the_repository_is_a_members(
    author: str | None, head_ref: str, head_repo: str, repository: str, member: bool
) -> None:
    found = member_pull_request(
        working(), repository, author=author, head_ref=head_ref, head_repo=head_repo, bot_login=BOT
    )
    assert found is member
    assert set_of_branch(head_ref) == (SET_ID if head_ref.startswith("change-set/") else None)


# --- the check, with the set's version ------------------------------------------------------------


@pytest.mark.parametrize(
    ("gates", "state", "merge"),
    [
        # the client's pull request is missing
        ({"schema": "ready", "server": "ready"}, "pending", ("pending", WAITS_FOR_SET)),
        ({"schema": "ready", "server": "ready", "client": "waiting"}, "pending", ("pending", WAITS_FOR_SET)),
        ({"schema": "ready", "server": "blocked", "client": "ready"}, "pending", ("pending", WAITS_FOR_SET)),
        ({"schema": "ready", "server": "ready", "client": "ready"}, "success", ("success", SET_MERGES)),
    ],
)
def test_the_check_passes_only_when_every_member_is_ready(
    gates: dict[str, str], state: str, merge: tuple[str, str]
) -> None:
    change_set = working(**gates)
    check = versioned_check(change_set)
    assert check.state == state and check.context == CHECK_NAME
    assert check.description.endswith(f"(v{change_set.version})")
    assert len(check.description) <= CHECK_DESCRIPTION_LENGTH
    assert posted_version([{"context": CHECK_NAME, "description": check.description}]) == change_set.version
    held = held_merge_status(change_set, "success")
    assert held is not None and held[0] == merge[0] and held[1].startswith(merge[1])
    assert held_merge_status(change_set, "pending") is None  # a member's own waiting stands


def test_posted_version_reads_only_the_sets_check() -> None:
    assert posted_version([{"context": "squadron/merge", "description": "ready (v9)"}]) is None
    assert posted_version([{"context": CHECK_NAME, "description": "someone's words"}]) == 0
    assert posted_version(None) is None


def test_a_long_description_keeps_its_version() -> None:
    names = {f"octo/r{i}": 20 + i for i in range(8)}
    proposed = cs.propose(
        set_id=SET_ID,
        installation_id=77,
        origin="octo/r0",
        issue=5,
        repositories=list(names)[1:],
        dependencies=(),
        installation_repositories=names,
        proposed_by="pm",
        open_sets=0,
        at=T0,
    )
    check = versioned_check(proposed.model_copy(update={"state": SetState.WORKING, "version": 123}))
    assert len(check.description) <= CHECK_DESCRIPTION_LENGTH and check.description.endswith("(v123)")


def test_the_pushed_notice_names_repository_branch_and_sha_only() -> None:
    text = pushed_notice(working(), "octo/server", f"change-set/{SET_ID}", "a" * 40, 4)
    assert "`octo/server`" in text and f"`change-set/{SET_ID}`" in text and "a" * 40 in text
