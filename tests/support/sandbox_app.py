"""The GitHub sandbox as the App's exactly-once tests start it: the App (424242) on a sandbox of
the first examples, GitHub's faults scripted per (method, path), and the App's client.

- :func:`app_sandbox`: a new sandbox (no webhook URL: its deliveries are recorded, not sent).
- :func:`app_on`: the sandbox started and the App signed in on it; the sandbox stops at the end.
- :func:`app_of`: the App on a sandbox already started, its client as patient as by default.
- :class:`FailFirst` and :class:`Scripted`: its ``api_fault``, which requests GitHub applies and
  then fails to answer.
- :func:`app_client`: the client of a repository as the App (installation 77) or as a person.
- :func:`push_branch`: files pushed to a branch of a sandbox repository, as a person pushes them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from squadron.adapters.github.auth import GitHubApp
from squadron.adapters.github.client import GitHubClient
from squadron.adapters.github.http import GitHubHttp, Throttle
from squadron.domain.permissions import Caller, CallerKind
from squadron.local.examples import first_examples
from squadron.local.sandbox import ApiFault, GitHubSandbox
from tests.support.git_remote import git
from tests.support.github_fake import app_private_key

APP_ID = 424242
INSTALLATION = 77


def app_sandbox(path: Path) -> GitHubSandbox:
    return GitHubSandbox(path, app_id=APP_ID, webhook_secret="s", examples=first_examples())


@contextmanager
def app_on(github: GitHubSandbox) -> Iterator[GitHubApp]:
    url = github.start()
    try:
        # The client gives up on an answer after 2 s: only the "hang" fault ever waits for it.
        http = GitHubHttp(
            base_url=url, sleep=lambda s: None, throttle=Throttle(sleep=lambda s: None), timeout=2.0
        )
        private, _ = app_private_key()
        yield GitHubApp(app_id=github.app_id, http=http, private_key=lambda: private)
    finally:
        github.stop()


def app_of(sandbox: GitHubSandbox) -> GitHubApp:
    private, _ = app_private_key()
    return GitHubApp(
        app_id=sandbox.app_id,
        http=GitHubHttp(base_url=sandbox.base_url, sleep=lambda s: None),
        private_key=lambda: private,
    )


class FailFirst:
    """Which requests GitHub applies and then fails to answer: the first of each (method, path)."""

    def __init__(self) -> None:
        self.wanted: dict[tuple[str, str], ApiFault] = {}
        self.hit: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def __call__(self, method: str, path: str) -> ApiFault | None:
        with self._lock:
            fault = self.wanted.pop((method, path.split("?", maxsplit=1)[0]), None)
            if fault is not None:
                self.hit.append((method, path))
            return fault


class Scripted:
    """The first request of each (method, path) named is answered as the test says."""

    def __init__(self) -> None:
        self.wanted: dict[tuple[str, str], list[ApiFault | None]] = {}
        self._lock = threading.Lock()

    def __call__(self, method: str, path: str) -> ApiFault | None:
        with self._lock:
            waiting = self.wanted.get((method, path.split("?", maxsplit=1)[0]))
            return waiting.pop(0) if waiting else None


def app_client(app: GitHubApp, repo: str, login: str | None = None) -> GitHubClient:
    """``repo``'s client as the App, or as ``login`` (the sandbox's human token)."""
    token = (lambda: f"human:{login}") if login else (lambda: app.installation_token(INSTALLATION).token)
    caller = Caller(CallerKind.FRAMEWORK, login or "framework", login or "framework")
    return GitHubClient(http=app.http, token=token, installation_id=INSTALLATION, repo=repo, caller=caller)


def push_branch(
    github: GitHubSandbox, clone: Path, repo: str, branch: str, files: dict[str, str], *, message: str
) -> str:
    """``files`` committed on ``branch`` (on its head where it exists, else on main) in ``clone``
    (cloned from ``repo`` the first time) and pushed: the new head."""
    if not clone.exists():
        git(clone.parent, "clone", "--quiet", github.git_url(repo), str(clone))
    git(clone, "fetch", "--quiet", "origin")
    exists = github.repos[repo].store.sha(f"refs/heads/{branch}") is not None
    git(clone, "checkout", "--quiet", "-B", branch, f"origin/{branch}" if exists else "origin/main")
    for name, text in files.items():
        (clone / name).write_text(text)
    git(clone, "add", "--all")
    git(clone, "commit", "--quiet", "-m", message)
    git(clone, "push", "--quiet", "origin", f"HEAD:refs/heads/{branch}")
    return git(clone, "rev-parse", "HEAD")
