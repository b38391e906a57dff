"""Carrying out a change set's merge, the pure part (squadron.domain.change_set_merges): the one
step a stored set asks for, what a member's pull request as GitHub shows it means, GitHub's
refusals in words, the branches that name a set (a forged one names none), and the escalation.
Tables of cases."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from squadron.domain import change_set_merges as m
from squadron.domain import change_sets as cs
from squadron.domain.change_sets import ChangeSet, SetState
from tests.unit.test_change_sets import SET_ID, T0, approved, merging, ready

SHA = "a" * 40
OTHER = "b" * 40


def merged(*names: str) -> ChangeSet:
    found = merging()
    for n, name in enumerate(names, start=1):
        found = cs.record_merged(found, name, f"{n:040x}", T0)
    return found


def failed_after(*names: str) -> ChangeSet:
    found = merged(*names)
    return cs.record_merge_failed(found, cs.next_merge(found) or "", "a conflict", T0)[0]


def reverting() -> ChangeSet:
    return cs.start_reverting(
        failed_after("octo/schema", "octo/server"), {"octo/schema": 8, "octo/server": 9}, T0
    )


STEPS: list[tuple[str, Callable[[], ChangeSet], m.Step]] = [
    ("ready: not merging yet", ready, m.Nothing("the set is ready")),
    ("merging: the first in order", merging, m.Merge("octo/schema", 1, None)),
    ("merging: the next after one merged", lambda: merged("octo/schema"), m.Merge("octo/server", 2, None)),
    ("merging: the last", lambda: merged("octo/schema", "octo/server"), m.Merge("octo/client", 3, None)),
    (
        "merged: over",
        lambda: merged("octo/schema", "octo/server", "octo/client"),
        m.Nothing("the set is merged"),
    ),
    ("failed with nothing merged: escalate", failed_after, m.Escalate()),
    (
        "failed after two: revert, newest first",
        lambda: failed_after("octo/schema", "octo/server"),
        m.OpenReverts(("octo/server", "octo/schema")),
    ),
    ("reverting: wait for both", reverting, m.AwaitReverts({"octo/schema": 8, "octo/server": 9})),
    (
        "reverting: one merged",
        lambda: cs.record_reverted(reverting(), "octo/server", T0),
        m.AwaitReverts({"octo/schema": 8}),
    ),
    (
        "reverted: escalate",
        lambda: cs.record_reverted(cs.record_reverted(reverting(), "octo/server", T0), "octo/schema", T0),
        m.Escalate(),
    ),
]


@pytest.mark.parametrize(("case", "make", "step"), STEPS, ids=[c[0] for c in STEPS])
def test_the_step_a_stored_set_asks_for(case: str, make: Callable[[], ChangeSet], step: m.Step) -> None:
    assert m.next_step(make()) == step


def test_a_member_is_merged_pinned_to_the_head_its_gate_judged() -> None:
    judged = cs.start_work(approved(), T0)
    for number, member in enumerate(judged.members, start=1):
        judged = cs.record_pull_request(judged, member.repository, number, T0)
        judged = cs.record_gate(judged, member.repository, "ready", T0, head_sha=SHA)
    assert judged.member("octo/server").head_sha == SHA
    assert m.next_step(cs.begin_merging(judged, T0)) == m.Merge("octo/schema", 1, SHA)


PULLS: list[tuple[str, dict[str, Any], str | None, m.PullOutcome]] = [
    ("open at the judged head", {"state": "open", "head": {"sha": SHA}}, SHA, m.PullOutcome("open")),
    ("open, no head judged", {"state": "open", "head": {"sha": OTHER}}, None, m.PullOutcome("open")),
    (
        "open, its head moved",
        {"state": "open", "head": {"sha": OTHER}},
        SHA,
        m.PullOutcome(
            "open", reason="the head moved: its gate judged aaaaaaaaaaaa, its head is now bbbbbbbbbbbb"
        ),
    ),
    (
        "merged (by an earlier attempt whose answer was lost)",
        {"state": "closed", "merged": True, "merge_commit_sha": OTHER, "head": {"sha": SHA}},
        SHA,
        m.PullOutcome("merged", sha=OTHER),
    ),
    (
        "closed without merging",
        {"number": 4, "state": "closed", "merged": False, "head": {"sha": SHA}},
        SHA,
        m.PullOutcome("closed", reason="pull request #4 was closed without merging"),
    ),
]


@pytest.mark.parametrize(("case", "pr", "judged", "outcome"), PULLS, ids=[c[0] for c in PULLS])
def test_what_a_members_pull_request_means(
    case: str, pr: dict[str, Any], judged: str | None, outcome: Any
) -> None:
    assert m.pull_outcome(pr, judged) == outcome


@pytest.mark.parametrize(
    ("status", "message", "said"),
    [
        (409, "Head branch was modified. Review and try the merge again.", "the head moved (Head branch was"),
        (
            405,
            "Pull Request is not mergeable",
            "a conflict or branch protection (Pull Request is not mergeable)",
        ),
        (405, "Repository rule violations found", "branch protection (Repository rule violations found)"),
        (422, "", "GitHub refused the merge (422: no message)"),
    ],
)
def test_githubs_refusals_in_words(status: int, message: str, said: str) -> None:
    assert said in m.refusal_reason(status, message)


@pytest.mark.parametrize(
    ("ref", "found"),
    [
        (f"change-set/{SET_ID}", SET_ID),
        (f"refs/heads/change-set/{SET_ID}", SET_ID),
        (f"revert-12-change-set/{SET_ID}", SET_ID),
        (f"change-set/{SET_ID}-evil", None),
        (f"evil/change-set/{SET_ID}", None),
        (f"revert-0-change-set/{SET_ID}", None),
        ("change-set/cs-NOTHEX000000", None),
        ("squadron/issue-5", None),
    ],
)
def test_which_branches_name_a_set(ref: str, found: str | None) -> None:
    assert m.set_of_branch(ref) == found


def test_a_revert_lives_where_githubs_revert_puts_it_and_names_the_set_again() -> None:
    branch = m.revert_branch(12, f"change-set/{SET_ID}")
    assert branch == f"revert-12-change-set/{SET_ID}"
    assert m.set_of_branch(branch) == SET_ID


def test_the_escalation_says_who_failed_why_what_merged_and_the_reverts_newest_first() -> None:
    failed = failed_after("octo/schema", "octo/server")
    text = m.escalation_text(failed, {"octo/server": 9, "octo/schema": 8}, mentions=("@octo-leads",))
    assert "merging octo/client failed: a conflict" in text
    assert "Merged before it: octo/schema#1, octo/server#2." in text
    assert "newest merge first: octo/server#9, octo/schema#8." in text
    assert "Not merged: octo/client." in text and text.endswith("@octo-leads")
    nothing = m.escalation_text(failed_after(), {})
    assert "Nothing had merged" in nothing and "Revert" not in nothing
    assert failed.state is SetState.FAILED
