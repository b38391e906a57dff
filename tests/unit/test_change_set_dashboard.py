"""The "Change sets" section of a repository's dashboard (squadron.domain.change_set_dashboard):
which sets a repository's dashboard shows, each member's PR and gate, what the set waits for, and
what of a set's text GitHub would act on (nothing). Tables of cases."""

from __future__ import annotations

from typing import Any

import pytest

from squadron.domain import change_set_dashboard as view
from squadron.domain import change_sets as cs
from squadron.domain import dashboard
from squadron.domain.change_sets import ChangeSet, SetState
from tests.unit.test_change_sets import T0, approved, proposed, ready


def member(change_set: ChangeSet, repository: str, **update: Any) -> ChangeSet:
    members = tuple(
        m.model_copy(update=update) if m.repository == repository else m for m in change_set.members
    )
    return change_set.model_copy(update={"members": members})


def working() -> ChangeSet:
    found = cs.start_work(approved(), T0)
    return cs.record_pull_request(found, "octo/server", 7, T0)


#: (what, the set, expected "waits for")
WAITS = [
    ("a writer's approval", proposed(), "a writer's approval in `octo/schema`, `octo/server`, `octo/client`"),
    ("pull requests not opened", working(), "the pull request of `octo/schema`, `octo/client`"),
    (
        "a gate not passed",
        member(member(working(), "octo/schema", pr_number=3), "octo/client", pr_number=9, gate="waiting"),
        "the gate of `octo/schema`, `octo/server`, `octo/client`",
    ),
    ("ready: merging next", ready(), "merging `octo/schema`, `octo/server`, `octo/client`"),
    (
        "one merged, two to merge",
        member(cs.begin_merging(ready(), T0), "octo/schema", merged=True),
        "merging `octo/server`, `octo/client`",
    ),
    (
        "escalated",
        ready().model_copy(update={"state": SetState.ESCALATED}),
        "a person (escalated on the origin issue)",
    ),
    ("merged", ready().model_copy(update={"state": SetState.MERGED}), "nothing (over)"),
]


@pytest.mark.parametrize(("change_set", "expected"), [w[1:] for w in WAITS], ids=[w[0] for w in WAITS])
def test_a_set_says_what_it_waits_for(change_set: ChangeSet, expected: str) -> None:
    assert view.waits_for(change_set) == expected


#: (what, repository whose dashboard, expected cells of the set's row or None: not shown)
ROWS = [
    (
        "the origin's dashboard",
        "octo/schema",
        ["`#5`", "`octo/schema` `#1` gate ready", "`octo/server` `octo/server#2`"],
    ),
    ("a member's dashboard", "octo/client", ["`octo/schema#5`", "`octo/client` `#3` gate ready"]),
    ("a repository not in the set", "octo/docs", None),
]


@pytest.mark.parametrize(("repository", "cells"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_a_dashboard_shows_the_sets_that_include_its_repository(
    repository: str, cells: list[str] | None
) -> None:
    found = ready()
    lines = view.change_sets_section(repository, [found])
    if cells is None:
        assert lines == []
        return
    row = next(line for line in lines if found.id in line)
    assert f"| `{found.id}` | ready |" in row
    for cell in cells:
        assert cell in row


def test_the_section_is_in_the_dashboard_and_bounded() -> None:
    sets = [ready().model_copy(update={"id": f"cs-{n:012x}"}) for n in range(view.MAX_SETS + 3)]
    body = dashboard.render("octo/server", [], change_sets=sets, now=T0)
    assert "### Change sets" in body
    assert sum(f"`{s.id}`" in body for s in sets) == view.MAX_SETS
    assert "### Change sets" not in dashboard.render("octo/docs", [], change_sets=sets, now=T0)


def test_a_sets_references_are_never_acted_on_by_github() -> None:
    """Other repositories' pull requests and the origin issue are code spans: GitHub neither
    links nor cross-references them (no notification in another repository)."""
    lines = view.change_sets_section("octo/client", [ready()])
    row = next(line for line in lines if line.startswith("| `cs-"))
    for cell in row.split(" | "):
        for part in cell.replace("<br>", " ").split("` "):
            if "#" in part:
                assert part.lstrip("| ").startswith("`"), part
