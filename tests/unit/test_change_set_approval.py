"""Approving a change set (squadron.shell.change_sets), played by the attacker: what a stranger,
a writer of the origin alone, a reader, a repository of another installation and a command on
the wrong issue GOT (the stored set and its events), and two approvals at once."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import pytest

from squadron.adapters.github.auth import GitHubApp
from squadron.adapters.github.errors import GitHubError
from squadron.adapters.github.for_router import AppGitHub
from squadron.adapters.github.http import GitHubHttp
from squadron.domain import change_sets as cs
from squadron.domain.change_sets import ChangeSet, ChangeSetRefusedError, SetState
from squadron.domain.domain_events import DomainEvent
from squadron.shell.change_sets import ChangeSetDesk, approval_command
from tests.support.fake_registry import FakeRegistry
from tests.support.github_fake import FakeGitHub, app_private_key

T0 = datetime(2026, 11, 28, 5, 0, tzinfo=UTC)
INSTALLATIONS = {
    77: {"octo/schema": 11, "octo/server": 12, "octo/client": 13},
    78: {"evil/fork": 21, "octo/secret": 22},
}


class Installations:
    """GitHub as the App sees it: each installation's repositories, each person's permission; a
    repository the installation does not cover is GitHub's 404 to its token."""

    def __init__(self) -> None:
        self.covered = {i: dict(repos) for i, repos in INSTALLATIONS.items()}
        self.permissions: dict[tuple[str, str], str] = {}
        self.asked: list[tuple[int | None, str, str]] = []

    def installation_repositories(self, installation_id: int) -> dict[str, int]:
        return dict(self.covered[installation_id])

    def permission(self, installation_id: int | None, repo_full_name: str, login: str) -> str:
        self.asked.append((installation_id, repo_full_name, login))
        if installation_id is None or repo_full_name not in self.covered[installation_id]:
            raise GitHubError(404, f"GET /repos/{repo_full_name}/collaborators/{login}/permission: Not Found")
        return self.permissions.get((repo_full_name, login), "none")


def desk(registry: FakeRegistry | None = None) -> tuple[ChangeSetDesk, FakeRegistry, Installations]:
    registry = registry or FakeRegistry()
    github = Installations()
    return ChangeSetDesk(registry, github, clock=lambda: T0), registry, github


def proposed(d: ChangeSetDesk, repositories: Sequence[str] = ("octo/server", "octo/client")) -> ChangeSet:
    return d.propose(
        installation_id=77,
        origin="octo/schema",
        issue=5,
        repositories=repositories,
        dependencies=(("octo/server", "octo/schema"), ("octo/client", "octo/server")),
        proposed_by="11-pm",
        proposal="delivery-1",
    )


def approve(d: ChangeSetDesk, change_set: ChangeSet, login: str, **where: object) -> object:
    given: dict[str, object] = {
        "set_id": change_set.id,
        "login": login,
        "installation_id": 77,
        "repository": "octo/schema",
        "issue": 5,
        "delivery": f"approve-{login}",
    }
    return d.approve(**{**given, **where})  # type: ignore[arg-type]


def kinds(events: dict[str, DomainEvent]) -> list[str]:
    return [e.detail_type for e in events.values()]


def test_a_proposal_is_stored_once_with_its_event() -> None:
    d, registry, _ = desk()
    first = proposed(d)
    assert proposed(d) == first  # the same proposal again
    assert registry.get_change_set(first.id) == first
    assert kinds(registry.events) == ["change_set.created.v1"]


def test_a_repository_of_another_installation_is_refused_with_a_reason_and_nothing_stored() -> None:
    d, registry, github = desk()
    with pytest.raises(ChangeSetRefusedError, match="octo/secret is not a repository of installation 77"):
        proposed(d, ("octo/server", "octo/secret"))
    assert registry.change_set_items == {} and registry.events == {}
    assert github.asked == []  # nobody's permission on it was even asked


@pytest.mark.parametrize("permission", ["none", "read", "triage"])
def test_a_strangers_or_readers_approval_does_nothing(permission: str) -> None:
    d, registry, github = desk()
    created = proposed(d)
    for repository in INSTALLATIONS[77]:
        github.permissions[(repository, "mallory")] = permission
    with pytest.raises(ChangeSetRefusedError, match="mallory cannot write any repository"):
        approve(d, created, "mallory")
    assert registry.get_change_set(created.id) == created  # unchanged: nothing approved
    assert kinds(registry.events) == ["change_set.created.v1"]


def test_a_writer_of_the_origin_alone_approves_the_origin_alone_and_no_other_repository_is_touched() -> None:
    d, registry, github = desk()
    created = proposed(d)
    github.permissions[("octo/schema", "origin-writer")] = "write"
    approve(d, created, "origin-writer")
    stored = registry.get_change_set(created.id)
    assert stored is not None and stored.state is SetState.PROPOSED  # no work starts
    assert [m.approved_by for m in stored.members] == ["origin-writer", None, None]
    # Each repository's permission was asked of GitHub for that repository, not the origin's alone.
    assert {repo for _, repo, _ in github.asked} == {"octo/schema", "octo/server", "octo/client"}
    with pytest.raises(ChangeSetRefusedError, match="octo/server, octo/client"):
        approve(d, stored, "origin-writer", delivery="again")
    # The other repositories' writers complete it.
    github.permissions[("octo/server", "srv")] = "maintain"
    github.permissions[("octo/client", "srv")] = "admin"
    approve(d, stored, "srv")
    done = registry.get_change_set(created.id)
    assert done is not None and done.state is SetState.APPROVED
    assert [m.approved_by for m in done.members] == ["origin-writer", "srv", "srv"]
    assert kinds(registry.events) == [
        "change_set.created.v1",
        "change_set.approved.v1",
        "change_set.approved.v1",
    ]


def test_a_writer_of_another_installation_approves_nothing_here() -> None:
    d, registry, github = desk()
    created = proposed(d)
    github.permissions[("evil/fork", "mallory")] = "admin"
    with pytest.raises(ChangeSetRefusedError, match=r"no change set .* in this installation"):
        approve(d, created, "mallory", installation_id=78, repository="evil/fork", issue=1)
    assert registry.get_change_set(created.id) == created
    assert github.asked == []


def test_a_command_on_another_issue_is_refused() -> None:
    d, registry, github = desk()
    created = proposed(d)
    github.permissions[("octo/server", "bob")] = "write"
    with pytest.raises(ChangeSetRefusedError, match="approved on octo/schema#5"):
        approve(d, created, "bob", repository="octo/server", issue=9)
    assert registry.get_change_set(created.id) == created


def test_a_repository_the_installation_stopped_covering_is_not_approved() -> None:
    d, registry, github = desk()
    created = proposed(d)
    for repository in INSTALLATIONS[77]:
        github.permissions[(repository, "alice")] = "write"
    del github.covered[77]["octo/client"]  # the owner deselected it meanwhile
    approve(d, created, "alice")
    stored = registry.get_change_set(created.id)
    assert stored is not None and stored.state is SetState.PROPOSED
    assert [m.approved_by for m in stored.members] == ["alice", "alice", None]
    assert "octo/client" not in {repo for _, repo, _ in github.asked}


class Racing(FakeRegistry):
    """A registry where another router's approval is stored just before this one's first save."""

    def __init__(self) -> None:
        super().__init__()
        self.other: tuple[ChangeSet, ChangeSet] | None = None

    def save_change_set(self, before: ChangeSet, after: ChangeSet, events: Sequence[DomainEvent]) -> None:
        if self.other is not None:
            other, self.other = self.other, None
            super().save_change_set(*other, ())
        super().save_change_set(before, after, events)


def test_two_approvals_at_once_both_count_and_the_state_never_goes_backwards() -> None:
    registry = Racing()
    d, _, github = desk(registry)
    created = proposed(d)
    github.permissions[("octo/schema", "alice")] = "write"
    github.permissions[("octo/server", "bob")] = "write"
    github.permissions[("octo/client", "bob")] = "write"
    bobs, _ = cs.approve(created, "bob", {"octo/server": "write", "octo/client": "write"}, T0)
    registry.other = (created, bobs)  # bob's lands first
    approve(d, created, "alice")
    stored = registry.get_change_set(created.id)
    assert stored is not None and stored.state is SetState.APPROVED
    assert [m.approved_by for m in stored.members] == ["alice", "bob", "bob"]
    assert stored.version == 3


@pytest.mark.parametrize(
    ("body", "found"),
    [
        ("/squadron change-set approve cs-0123456789ab", "cs-0123456789ab"),
        ("Looks right.\n  /squadron  change-set approve cs-0123456789ab  \nthanks", "cs-0123456789ab"),
        ("> /squadron change-set approve cs-0123456789ab", None),  # quoted, not said
        ("/squadron change-set approve cs-XYZ", None),
        ("please /squadron change-set approve cs-0123456789ab", None),
        ("", None),
    ],
)
def test_the_command_is_read_from_a_line_of_its_own(body: str, found: str | None) -> None:
    assert approval_command(body) == found


def test_the_apps_installation_repositories_are_read_from_github() -> None:
    fake = FakeGitHub()
    private, _ = app_private_key()
    http = GitHubHttp(transport=fake.transport(), sleep=lambda s: None)
    github = AppGitHub(GitHubApp(app_id=42, http=http, private_key=lambda: private))
    assert github.installation_repositories(7) == {"octo/app": 1}
    paths = [f"{r.method} {r.url.path}" for r in fake.requests]
    assert paths == ["POST /app/installations/7/access_tokens", "GET /installation/repositories"]
