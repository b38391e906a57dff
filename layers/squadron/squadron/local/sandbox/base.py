"""What every part of the sandbox works with: its records, its errors, the App and its repositories.

:class:`SandboxBase` holds the sandbox's state (one App, one installation, its repositories
and webhook deliveries) and answers who is who (the App's ``<slug>[bot]``, humans, other
bots) and which repository a request names. Each topic (:mod:`.webhooks`, :mod:`.state`,
:mod:`.apps`, :mod:`.repositories`, :mod:`.issues`, :mod:`.pulls`, :mod:`.checks`) builds on it.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal

from squadron.domain.app_manifest import app_events, app_permissions
from squadron.local.git_store import GitStore

Json = dict[str, Any]


class ApiError(Exception):
    def __init__(self, status: int, message: str, errors: list[Json] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.errors = errors or []


class PagedObject(dict[str, Any]):
    """One page of a list GitHub wraps in an object (``{"total_count", "repositories"}``), with
    the URL of the next page (``Link: rel="next"``) if there is one."""

    next_url: str = ""


def github_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Repo:
    id: int
    owner: str
    name: str
    default_branch: str
    store: GitStore
    #: Issues and pull requests share numbers, as on GitHub.
    issues: dict[int, Json] = field(default_factory=dict)
    pulls: dict[int, Json] = field(default_factory=dict)
    comments: dict[int, list[Json]] = field(default_factory=dict)
    reviews: dict[int, list[Json]] = field(default_factory=dict)
    statuses: dict[str, list[Json]] = field(default_factory=dict)
    check_runs: dict[str, list[Json]] = field(default_factory=dict)
    protections: dict[str, Json] = field(default_factory=dict)
    permissions: dict[str, str] = field(default_factory=dict)
    #: Branches whose rules require a merge queue: branch -> the ``merge_queue`` rule's parameters.
    merge_queues: dict[str, Json] = field(default_factory=dict)
    #: The merge queues' entries, oldest first (:mod:`.queues`).
    queue: list[Json] = field(default_factory=list)
    #: Whether the App's installation covers this repository (an owner can select repositories).
    installed: bool = True
    #: A private repository is Not Found to whoever may not read it (a token scoped elsewhere).
    private: bool = False

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"


@dataclass
class Delivery:
    id: int
    guid: str
    event: str
    action: str | None
    payload: Json
    delivered_at: str
    status_code: int = 0
    redelivery: bool = False
    duration: float = 0.0
    #: Never sent and not listed: a delivery GitHub lost (a fault a test injects).
    lost: bool = False
    #: How many times it was posted to the webhook URL.
    attempts: int = 0


#: What a test makes of one delivery: ``lose`` it (never sent, not listed), ``fail`` it (not
#: sent, listed as failed with 502 so the App may redeliver it), or send it twice.
Fault = Literal["lose", "fail", "duplicate"]

#: What a test makes of one REST request, as GitHub under load does: apply it, then answer
#: ``502`` (GitHub's front end timed out while the write committed), ``drop`` the connection
#: without an answer, or ``hang`` without an answer until the client gives up (its read
#: timeout); or ``refuse`` it before anything is applied (``503``, nothing done).
ApiFault = Literal["502", "drop", "hang", "refuse"]


class SandboxBase:
    """The App, its installation, its repositories and deliveries: what every operation reads."""

    def __init__(
        self,
        root: Path,
        *,
        app_id: int = 424242,
        app_slug: str = "squadron",
        installation_id: int = 77,
        webhook_url: str | None = None,
        webhook_secret: str,
        examples: Mapping[tuple[str, str | None], Json] | None = None,
        app_public_key: str | None = None,
    ) -> None:
        self.root = root
        self.app_id = app_id
        #: With the App's public key (PEM), an App JWT counts only when it is signed with the App's
        #: private key and names the App's id as ``iss``, as on GitHub; without, any JWT does.
        self.app_public_key = app_public_key
        #: The App's permissions and events as its settings page has them (the manifest's by
        #: default), and what its installation accepted.
        self.app_permissions: dict[str, str] = app_permissions()
        self.app_events: list[str] = app_events()
        self.installation_permissions: dict[str, str] = app_permissions()
        self.app_slug = app_slug
        self.installation_id = installation_id
        self.webhook_url = webhook_url
        self.webhook_secret = webhook_secret
        #: GitHub's published example payload per (event, action): the shape webhooks take.
        self.examples = dict(examples or {})
        self.repos: dict[str, Repo] = {}
        self.deliveries: list[Delivery] = []
        self.tokens: dict[str, str] = {}
        #: The repositories (full names) an installation token was narrowed to when minted; a
        #: token not here reaches every repository of the installation.
        self.token_scopes: dict[str, list[str]] = {}
        #: The permissions each installation token holds (:mod:`.grants`): those it was minted
        #: with, else the installation's.
        self.token_permissions: dict[str, dict[str, str]] = {}
        #: The credential of the request being answered (set under the lock while it is).
        self._credential: str | None = None
        self._ids = itertools.count(1000)
        self._lock = threading.RLock()
        self._outbox: queue.Queue[Delivery | None] = queue.Queue()
        self._server: ThreadingHTTPServer | None = None
        self._threads: list[threading.Thread] = []
        self.base_url = ""
        #: A fault to apply to each delivery (None: every webhook is sent once).
        self.fault: Callable[[Delivery], Fault | None] | None = None
        #: A fault to apply to each REST request, by method and path (None: each is answered).
        self.api_fault: Callable[[str, str], ApiFault | None] | None = None

    # --- identities ------------------------------------------------------------------------

    @property
    def bot_login(self) -> str:
        return f"{self.app_slug}[bot]"

    def is_app(self, login: str) -> bool:
        """Whether ``login`` is this App (another App's ``<slug>[bot]`` is a bot, not the App)."""
        return login == self.bot_login

    def user(self, login: str) -> Json:
        bot = login.endswith("[bot]")
        return {
            "login": login,
            # The App's bot user has its own id on GitHub; any other account (another App's bot
            # included) has one of its own too, never this App's.
            "id": self.app_id if self.is_app(login) else 10_000 + sum(login.encode()),
            "node_id": f"U_{login}",
            "type": "Bot" if bot else "User",
            "site_admin": False,
            "html_url": f"https://github.com/{login}",
        }

    def _simple_user(self, login: str) -> Json:
        """``login`` as GitHub's ``simple-user`` (every field it requires)."""
        api = f"https://api.github.com/users/{login}"
        return {
            **self.user(login),
            "avatar_url": f"https://avatars.githubusercontent.com/u/{self.user(login)['id']}",
            "gravatar_id": "",
            "url": api,
            **{
                f"{name}_url": f"{api}/{path}"
                for name, path in {
                    "followers": "followers",
                    "following": "following{/other_user}",
                    "gists": "gists{/gist_id}",
                    "starred": "starred{/owner}{/repo}",
                    "subscriptions": "subscriptions",
                    "organizations": "orgs",
                    "repos": "repos",
                    "events": "events{/privacy}",
                    "received_events": "received_events",
                }.items()
            },
        }

    def _app(self) -> Json:
        """The App as ``GET /app`` answers it (GitHub's ``integration``)."""
        return {
            "id": self.app_id,
            "slug": self.app_slug,
            "node_id": f"A_{self.app_id}",
            "client_id": f"Iv1.sandbox{self.app_id}",
            "owner": self._simple_user("octo"),
            "name": self.app_slug,
            "description": None,
            "external_url": "https://github.com/octo",
            "html_url": f"https://github.com/apps/{self.app_slug}",
            "created_at": "2026-01-01T00:00:00Z",
            "updated_at": "2026-01-01T00:00:00Z",
            "permissions": dict(self.app_permissions),
            "events": list(self.app_events),
            "installations_count": 1,
        }

    def _installation(self) -> Json:
        """The App's one installation (GitHub's ``installation``), on the owner ``octo``."""
        return {
            "id": self.installation_id,
            "account": self._simple_user("octo"),
            "repository_selection": "selected"
            if any(not r.installed for r in self.repos.values())
            else "all",
            "access_tokens_url": f"{self.base_url}/app/installations/{self.installation_id}/access_tokens",
            "repositories_url": f"{self.base_url}/installation/repositories",
            "html_url": f"https://github.com/settings/installations/{self.installation_id}",
            "app_id": self.app_id,
            "app_slug": self.app_slug,
            "target_id": self.user("octo")["id"],
            "target_type": "Organization",
            "permissions": dict(self.installation_permissions),
            "events": list(self.app_events),
            "created_at": "2026-01-01T00:00:00Z",
            "updated_at": "2026-01-01T00:00:00Z",
            "single_file_name": None,
            "suspended_at": None,
            "suspended_by": None,
        }

    # --- repositories ------------------------------------------------------------------------

    def add_repository(
        self, full_name: str, files: Mapping[str, str], *, permissions: Mapping[str, str] | None = None
    ) -> Repo:
        owner, name = full_name.split("/")
        store = GitStore.create(self.root / "git" / owner / f"{name}.git", dict(files))
        repo = Repo(len(self.repos) + 1, owner, name, "main", store, permissions=dict(permissions or {}))
        with self._lock:
            self.repos[full_name] = repo
        if self.base_url:
            store.install_push_hook(f"{self.base_url}/_sandbox/pushed", full_name)
        return repo

    def git_url(self, full_name: str) -> str:
        return str(self.repos[full_name].store.path)

    def repository(self, repo: Repo) -> Json:
        return {
            "id": repo.id,
            "node_id": f"R_{repo.id}",
            "name": repo.name,
            "full_name": repo.full_name,
            "private": repo.private,
            "owner": self.user(repo.owner),
            "html_url": f"https://github.com/{repo.full_name}",
            "default_branch": repo.default_branch,
        }

    # --- hooks the merge queue (:mod:`.queues`) fills in ------------------------------------

    def _checks_changed(self, repo: Repo, sha: str) -> None:
        """A status or check run on ``sha`` was reported (a merge group's head may be waiting)."""

    def _head_moved(self, repo: Repo, pr: Json) -> None:
        """A pull request's head branch got new commits (a queued one leaves the queue)."""

    def _queue_required(self, repo: Repo, branch: str) -> bool:
        """Whether ``branch``'s rules require a merge queue."""
        return branch in repo.merge_queues

    def reaches(self, credential: str, full_name: str) -> bool:
        """Whether an installation token reaches ``full_name`` as the App: a repository its
        installation covers and, if it was narrowed, one it was narrowed to."""
        repo = self.repos.get(full_name)
        if repo is None or not repo.installed:
            return False
        scope = self.token_scopes.get(credential)
        return scope is None or full_name in scope

    def check_scope(self, credential: str, method: str, full_name: str) -> None:
        """GitHub's answer to an installation token on a repository it does not reach: a private
        one is Not Found, a public one may be read as anyone may, never written."""
        if credential not in self.tokens or self.reaches(credential, full_name):
            return
        repo = self.repos.get(full_name)
        if repo is None or repo.private:
            raise ApiError(404, "Not Found")
        if method not in ("GET", "HEAD"):
            raise ApiError(403, "Resource not accessible by integration")

    def _repo(self, params: Mapping[str, str]) -> Repo:
        repo = self.repos.get(f"{params.get('owner')}/{params.get('repo')}")
        if repo is None:
            raise ApiError(404, "Not Found")
        return repo
