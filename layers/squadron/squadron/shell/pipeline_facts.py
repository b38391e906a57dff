"""What GitHub says now about a run's issue or pull request, for a gate's judgement
(:mod:`squadron.domain.pipelines.judge`): read with the App's client in the framework's role
(its permission table allows the framework to read), never written.

Reviews are judged under the merge gate's authority rule (:mod:`squadron.domain.pipelines.authority`),
so the permission of each reviewer with a standing approval or change request is read as the
merge gate reads it (:func:`squadron.domain.merge_gate.permissions_wanted`: not the author, the
App or bots; change requests first; at most
:data:`~squadron.domain.merge_gate.MAX_REVIEWERS_CHECKED`), through the router's cache when wired
with it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from squadron.domain.event_fields import is_bot_account
from squadron.domain.merge_gate import permissions_wanted
from squadron.domain.pipelines.judge import CheckResult, Facts, Review
from squadron.domain.pipelines.repo_paths import check_repo_path
from squadron.domain.pipelines.work import Where

#: (installation, repository, login) -> the login's repository permission
#: (:meth:`squadron.adapters.github.for_router.AppGitHub.permission`, cached).
PermissionReader = Callable[[int | None, str, str], str]


class RepositoryClient(Protocol):
    """The reads of :class:`squadron.adapters.github.client.GitHubClient` a judgement makes."""

    def get_issue(self, number: int) -> dict[str, Any]: ...

    def get_pull(self, number: int) -> dict[str, Any]: ...

    def list_pull_files(self, number: int) -> list[dict[str, Any]]: ...

    def list_reviews(self, number: int) -> list[dict[str, Any]]: ...

    def list_check_runs(self, ref: str) -> list[dict[str, Any]]: ...

    def get_combined_status(self, ref: str) -> dict[str, Any]: ...

    def collaborator_permission(self, login: str) -> str: ...

    def get_repository(self) -> dict[str, Any]: ...

    def list_directory(self, path: str, ref: str) -> list[dict[str, Any]] | dict[str, Any] | None: ...


class ClientFor(Protocol):
    """:meth:`squadron.adapters.github.for_router.AppGitHub.client`."""

    def client(self, installation_id: int | None, repo_full_name: str) -> Any: ...


class GitHubFacts:
    """:class:`Facts` of an issue or pull request, read through the App (one client per read).

    ``bot_login``: the App's login (default: ``github.bot_login``, as AppGitHub has it);
    ``permission``: the router's cached permission reader (default: ask the client each time)."""

    def __init__(
        self, github: ClientFor, *, bot_login: str | None = None, permission: PermissionReader | None = None
    ) -> None:
        self.github = github
        self.bot_login = bot_login or str(getattr(github, "bot_login", None) or "")
        self.permission = permission

    def facts(
        self, where: Where, number: int, others: tuple[int, ...] = (), paths: tuple[str, ...] = ()
    ) -> Facts:
        """``paths``: what the judgement's ``file_exists`` checks name (bounded and normalised by
        :mod:`squadron.domain.pipelines.repo_paths`), read at each pull request's head."""
        client: RepositoryClient = self.github.client(where.installation_id, where.repo_full_name)
        read = {other: self._present(client, self._one(client, where, other), paths) for other in others}
        own = self._present(client, self._one(client, where, number), paths)
        return Facts(**{**own.__dict__, "others": read})

    @staticmethod
    def _present(client: RepositoryClient, facts: Facts, paths: tuple[str, ...]) -> Facts:
        """``facts`` with whether each of ``paths`` exists at its head (an issue's: the default
        branch); a pull request whose head GitHub does not name has them unread."""
        if not paths:
            return facts
        ref = facts.head_sha if facts.is_pull else str(client.get_repository().get("default_branch") or "")
        if not ref:
            return facts
        present = {path: client.list_directory(path, ref) is not None for path in paths if _plain(path)}
        return Facts(**{**facts.__dict__, "present": present})

    def _permissions(self, client: RepositoryClient, where: Where, logins: list[str]) -> dict[str, str]:
        if self.permission is None:
            return {login: client.collaborator_permission(login) for login in logins}
        return {
            login: self.permission(where.installation_id, where.repo_full_name, login) for login in logins
        }

    def _one(self, client: RepositoryClient, where: Where, number: int) -> Facts:
        issue = client.get_issue(number)
        labels = frozenset(str(label.get("name", "")) for label in issue.get("labels") or [])
        if "pull_request" not in issue:
            return Facts(number=number, labels=labels, state=str(issue.get("state") or "open"))
        pull = client.get_pull(number)
        head = str((pull.get("head") or {}).get("sha") or "")
        files = tuple(str(item.get("filename", "")) for item in client.list_pull_files(number))
        listed = client.list_reviews(number)
        reviews = tuple(
            Review(
                login=str((item.get("user") or {}).get("login", "")),
                state=str(item.get("state", "")),
                bot=is_bot_account(
                    (item.get("user") or {}).get("type"), str((item.get("user") or {}).get("login", ""))
                ),
                submitted_at=str(item.get("submitted_at") or ""),
            )
            for item in listed
        )
        permissions = self._permissions(client, where, permissions_wanted(pull, listed, self.bot_login))
        checks: list[CheckResult] = []
        if head:
            for run in client.list_check_runs(head):
                done = run.get("status") == "completed"
                checks.append(
                    CheckResult(
                        str(run.get("name", "")),
                        run.get("conclusion") if done else None,
                        kind="check_run",
                        app=str((run.get("app") or {}).get("slug") or ""),
                    )
                )
            for status in client.get_combined_status(head).get("statuses") or []:
                checks.append(
                    CheckResult(
                        str(status.get("context", "")),
                        str(status.get("state", "pending")),
                        kind="status",
                        creator=str((status.get("creator") or {}).get("login") or ""),
                    )
                )
        head_repo = ((pull.get("head") or {}).get("repo") or {}).get("full_name")
        base_repo = ((pull.get("base") or {}).get("repo") or {}).get("full_name") or where.repo_full_name
        return Facts(
            number=number,
            labels=labels,
            is_pull=True,
            files=files,
            reviews=reviews,
            author=str((pull.get("user") or {}).get("login") or ""),
            permissions=permissions,
            app_login=self.bot_login,
            # a head whose repository GitHub no longer names (a deleted fork) is taken for a fork's
            fork="head" in pull and str(head_repo or "").casefold() != str(base_repo).casefold(),
            checks=tuple(checks),
            mergeable_state=str(pull.get("mergeable_state") or "unknown"),
            state="merged" if pull.get("merged") else str(pull.get("state") or "open"),
            head_sha=head,
        )


def _plain(path: str) -> bool:
    """Whether ``path`` is one the configuration accepts (a task's config passed the same check
    when the definition was read; one that did not is left unread, never asked for)."""
    try:
        return check_repo_path(path) == path
    except ValueError:
        return False
