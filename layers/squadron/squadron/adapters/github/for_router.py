"""GitHub as the router and the config loader see it: framework calls through the App.

Both act as the framework (:meth:`Caller.framework`) with a cached installation
token of the event's installation. Collaborator permissions are cached for a
few minutes per (repository, login): a busy issue thread asks GitHub once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from squadron.adapters.github.auth import GitHubApp
from squadron.adapters.github.client import GitHubAppClient, GitHubClient
from squadron.adapters.github.errors import GitHubError
from squadron.adapters.github.keyed import once
from squadron.config.loader import ABSENT, Entry, EntryKind, Listing
from squadron.domain.effects import marked
from squadron.domain.markers import inert
from squadron.domain.permissions import Caller, CallerKind
from squadron.errors import SquadronError

PERMISSION_TTL = timedelta(minutes=5)
#: How far back a keyed write whose answer was just lost is looked for (clocks differ a little).
LOOKBACK = timedelta(minutes=5)


def _now() -> datetime:
    return datetime.now(UTC)


class MissingInstallationError(SquadronError):
    """An event without an installation id: the App cannot act on its repository."""


class AppGitHub:
    """Framework-role clients per (installation, repository)."""

    def __init__(
        self, app: GitHubApp, *, clock: Callable[[], datetime] = _now, bot_login: str | None = None
    ) -> None:
        self.app = app
        #: The App's own login: only what it wrote counts as an effect already carried out.
        self.bot_login = bot_login
        self.clock = clock
        self._permissions: dict[tuple[str, str], tuple[str, datetime]] = {}
        self._installations: dict[str, int] = {}
        self._lock = threading.Lock()

    def remember(self, repo_full_name: str, installation_id: int | None) -> None:
        """Note the installation of a repository (every event names it)."""
        if installation_id is not None:
            with self._lock:
                self._installations[repo_full_name] = installation_id

    def client(self, installation_id: int | None, repo_full_name: str) -> GitHubClient:
        if installation_id is None:
            with self._lock:
                installation_id = self._installations.get(repo_full_name)
            if installation_id is None:
                raise MissingInstallationError(f"no installation known for {repo_full_name}")
        with self._lock:
            self._installations[repo_full_name] = installation_id
        chosen = installation_id
        return GitHubClient(
            http=self.app.http,
            token=lambda: self.app.installation_token(chosen).token,
            installation_id=chosen,
            repo=repo_full_name,
            caller=Caller.framework(),
        )

    # --- RouterGitHub -------------------------------------------------------------------------

    def permission(self, installation_id: int | None, repo_full_name: str, login: str) -> str:
        key = (repo_full_name, login)
        now = self.clock()
        with self._lock:
            cached = self._permissions.get(key)
        if cached is not None and now - cached[1] < PERMISSION_TTL:
            return cached[0]
        permission = self.client(installation_id, repo_full_name).collaborator_permission(login)
        with self._lock:
            self._permissions[key] = (permission, now)
        return permission

    def installation_repositories(self, installation_id: int) -> dict[str, int]:
        """The repositories the installation covers now: full name -> id (a change set spans only
        these: docs/change-sets.md). Read with the installation's own token, page by page."""
        apps = GitHubAppClient(
            http=self.app.http, jwt=self.app.jwt, app_id=self.app.app_id, caller=Caller.framework()
        )
        token = self.app.installation_token(installation_id).token
        return {str(r["full_name"]): int(r["id"]) for r in apps.list_installation_repositories(token)}

    def comment(
        self,
        installation_id: int | None,
        repo_full_name: str,
        number: int,
        body: str,
        author: str,
        *,
        key: str | None = None,
    ) -> None:
        client = self.client(installation_id, repo_full_name)
        if author != "framework":  # the framework writing on behalf of a named part of itself
            client.caller = Caller(CallerKind.FRAMEWORK, author, author)
        body = inert(body)  # it may quote an agent (an escalation's reason, its summary)
        if key is None:
            client.comment(number, body)
            return
        once(
            lambda: client.comment(number, marked(body, key)),
            lambda: client.find_comment(number, key, self.bot_login, self.clock() - LOOKBACK),
        )

    def close_issue(self, installation_id: int | None, repo_full_name: str, number: int, reason: str) -> None:
        self.client(installation_id, repo_full_name).close_issue(
            number, "not_planned" if reason == "not_planned" else "completed"
        )

    def add_labels(
        self, installation_id: int | None, repo_full_name: str, number: int, labels: tuple[str, ...]
    ) -> None:
        self.client(installation_id, repo_full_name).add_labels(number, labels)

    def remove_label(self, installation_id: int | None, repo_full_name: str, number: int, label: str) -> None:
        self.client(installation_id, repo_full_name).remove_label(number, label)

    def add_assignees(
        self, installation_id: int | None, repo_full_name: str, number: int, logins: tuple[str, ...]
    ) -> None:
        self.client(installation_id, repo_full_name).add_assignees(number, logins)

    def create_issue(
        self,
        installation_id: int | None,
        repo_full_name: str,
        *,
        title: str,
        body: str,
        labels: tuple[str, ...],
        assignees: tuple[str, ...],
        key: str | None = None,
    ) -> int:
        client = self.client(installation_id, repo_full_name)
        # They may quote an agent (a needs-human issue, a retrospective's items).
        title, body = inert(title), inert(body)
        if key is None:
            return int(client.create_issue(title, body, labels=labels, assignees=assignees)["number"])
        issue = once(
            lambda: client.create_issue(title, marked(body, key), labels=labels, assignees=assignees),
            lambda: client.find_issue(key, self.bot_login, self.clock() - LOOKBACK),
        )
        return int(issue["number"])

    def find_comment(
        self, installation_id: int | None, repo_full_name: str, number: int, key: str, since: datetime
    ) -> bool:
        client = self.client(installation_id, repo_full_name)
        return client.find_comment(number, key, self.bot_login, since) is not None

    def find_issue(
        self,
        installation_id: int | None,
        repo_full_name: str,
        key: str,
        labels: tuple[str, ...],
        since: datetime,
    ) -> int | None:
        # Not filtered by ``labels``: a person may have taken one off since.
        found = self.client(installation_id, repo_full_name).find_issue(key, self.bot_login, since)
        return int(found["number"]) if found is not None else None

    def issue_state(self, installation_id: int | None, repo_full_name: str, number: int) -> str:
        client = self.client(installation_id, repo_full_name)
        try:
            issue = client.get_issue(number)
            if "pull_request" not in issue:
                return str(issue.get("state") or "unknown")
            pull = client.get_pull(number)
        except GitHubError:
            return "unknown"
        return "merged" if pull.get("merged") else str(pull.get("state") or "unknown")


class RepositoryFilesOverGitHub:
    """The config loader's :class:`~squadron.config.RepositoryFiles` over the contents API."""

    def __init__(self, client_for: Callable[[str], GitHubClient]) -> None:
        self.client_for = client_for

    def default_branch_head(self, repo: str) -> tuple[str, str]:
        client = self.client_for(repo)
        branch = str(client.get_repository()["default_branch"])
        return branch, str(client.get_branch(branch)["commit"]["sha"])

    def list_dir(self, repo: str, path: str, ref: str) -> Listing:
        found = self.client_for(repo).list_directory(path, ref)
        if found is None:
            return ABSENT
        if isinstance(found, dict):  # the path is no directory: GitHub describes what it is
            kind = found.get("type")
            return Listing("symlink" if kind == "symlink" else "file" if kind == "file" else "other")
        return Listing("dir", tuple(_entry(item) for item in found if isinstance(item.get("name"), str)))

    def read_bytes(self, repo: str, path: str, ref: str, *, limit: int) -> bytes | None:
        return self.client_for(repo).read_file(path, ref, max_bytes=limit)


#: The contents API's entry types; a submodule is listed as a "file" of size 0 (GitHub keeps
#: that for compatibility) and read as none.
_KINDS: dict[object, EntryKind] = {"file": "file", "dir": "dir", "symlink": "symlink"}


def _entry(item: dict[str, Any]) -> Entry:
    size = item.get("size")
    return Entry(
        str(item["name"]),
        _KINDS.get(item.get("type"), "other"),
        size if isinstance(size, int) and not isinstance(size, bool) else None,
    )


def app_repository_files(github: AppGitHub) -> RepositoryFilesOverGitHub:
    """Files read with the installation :meth:`AppGitHub.remember` noted for each repository."""
    return RepositoryFilesOverGitHub(lambda repo: github.client(None, repo))
