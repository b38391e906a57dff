"""Proposing and approving change sets (docs/change-sets.md): the steps that ask GitHub who may
say yes, and store each step with its events (:mod:`squadron.domain.change_sets` decides).

A set spans only repositories the origin's installation covers, as GitHub says now (never a
name the proposal merely claims). A person approves, with ``/squadron change-set approve <id>``
on the set's origin issue, each repository of the set that GitHub says they can write
(:data:`~squadron.domain.change_sets.WRITER_PERMISSIONS`), each asked of GitHub through the App
for that repository; a repository the installation no longer covers is not approved. Nothing
else happens to any repository here: no agent, branch or pull request exists before every
repository has its writer's approval, and approving never gives an agent of one repository a
right to another (docs/security.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from squadron.domain import change_sets as domain
from squadron.domain.agents import ConflictError
from squadron.domain.change_set_commands import COMMAND, approval_command
from squadron.domain.change_set_events import events_of
from squadron.domain.change_sets import ChangeSet, ChangeSetRefusedError
from squadron.registry_ports import ChangeSets

#: How often a step is tried again when another router stored the set first.
ATTEMPTS = 3

__all__ = ["ATTEMPTS", "COMMAND", "Approval", "ChangeSetDesk", "ChangeSetGitHub", "approval_command"]


class ChangeSetGitHub(Protocol):
    """What approving asks GitHub (:class:`squadron.adapters.github.for_router.AppGitHub`)."""

    def permission(self, installation_id: int | None, repo_full_name: str, login: str) -> str: ...

    def installation_repositories(self, installation_id: int) -> dict[str, int]: ...


@dataclass(frozen=True)
class Approval:
    """What an approval did: the set now, and the repositories approved by it."""

    change_set: ChangeSet
    approved: tuple[str, ...]


@dataclass
class ChangeSetDesk:
    registry: ChangeSets
    github: ChangeSetGitHub
    clock: Callable[[], datetime]

    def propose(
        self,
        *,
        installation_id: int,
        origin: str,
        issue: int,
        repositories: Sequence[str],
        dependencies: Sequence[tuple[str, str]],
        proposed_by: str,
        proposal: str,
    ) -> ChangeSet:
        """Store a new set in ``proposed`` (the same ``proposal`` again: the set it made).
        Raises :class:`ChangeSetRefusedError` with the reason; nothing is stored then."""
        installed = self.github.installation_repositories(installation_id)
        origin_id = {name.lower(): repo_id for name, repo_id in installed.items()}.get(origin.lower())
        if origin_id is None:
            raise ChangeSetRefusedError(f"{origin} is not a repository of installation {installation_id}")
        set_id = domain.change_set_id(installation_id, origin_id, issue, proposal)
        existing = self.registry.get_change_set(set_id)
        if existing is not None:
            return existing
        created = domain.propose(
            set_id=set_id,
            installation_id=installation_id,
            origin=origin,
            issue=issue,
            repositories=repositories,
            dependencies=dependencies,
            installation_repositories=installed,
            proposed_by=proposed_by,
            open_sets=self.registry.open_change_sets(installation_id),
            at=self.clock(),
        )
        try:
            self.registry.create_change_set(created, events_of(None, created, correlation_id=proposal))
        except ConflictError as exc:
            stored = self.registry.get_change_set(set_id)
            if stored is not None:
                return stored  # the same proposal, stored by another router meanwhile
            raise ChangeSetRefusedError(str(exc)) from exc
        return created

    def approve(
        self, *, set_id: str, login: str, installation_id: int, repository: str, issue: int, delivery: str
    ) -> Approval:
        """``login``'s ``/squadron change-set approve`` on ``repository``'s ``issue``.

        Refused (nothing stored) when the set does not exist, is another installation's, was not
        proposed on that issue, or ``login`` can write none of its repositories still waiting.
        """
        for _ in range(ATTEMPTS):
            found = self.registry.get_change_set(set_id)
            if found is None or found.installation_id != installation_id:
                raise ChangeSetRefusedError(f"no change set {set_id} in this installation")
            if (found.origin_repository.lower(), found.issue) != (repository.lower(), issue):
                raise ChangeSetRefusedError(
                    f"change set {set_id} is approved on {found.origin_repository}#{found.issue}, where it was proposed"
                )
            after, approved = domain.approve(found, login, self._permissions(found, login), self.clock())
            events = events_of(found, after, correlation_id=delivery, approved=approved, by=login)
            try:
                self.registry.save_change_set(found, after, events)
            except ConflictError:
                continue  # another step stored it first: read it again and decide again
            return Approval(after, approved)
        raise ChangeSetRefusedError(f"change set {set_id} kept changing: try again")

    def _permissions(self, change_set: ChangeSet, login: str) -> Mapping[str, str | None]:
        """``login``'s permission on each repository still waiting, asked of GitHub for that
        repository (None: the installation no longer covers it)."""
        covered = {name.lower() for name in self.github.installation_repositories(change_set.installation_id)}
        return {
            member.repository: (
                self.github.permission(change_set.installation_id, member.repository, login)
                if member.repository.lower() in covered
                else None
            )
            for member in change_set.members
            if member.approved_by is None
        }
