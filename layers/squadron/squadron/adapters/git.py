"""The agent's working copy: a git checkout on the session volume, pushed only by the framework.

The working copy lives next to the Copilot session state (EFS in ECS), so a
woken agent finds its files as it left them. The model edits files and may run
git locally through its host tools, but it holds no credentials: fetching and
pushing are done here, with the task's narrowed installation token handed to
git per command through ``GIT_CONFIG_*`` environment variables (never in argv,
never written to ``.git/config``). Only the agent's own branch is ever pushed,
and never with force: a rejected push is reported, not overwritten.
"""

from __future__ import annotations

import base64
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from squadron.domain.permissions import Action, Caller, check
from squadron.errors import SquadronError

#: A git command must not hang a task: network operations get this long.
GIT_TIMEOUT_SECONDS = 300


class GitError(SquadronError):
    """A git command failed; the message carries git's own words."""


@dataclass(frozen=True)
class GitRemote:
    #: ``https://github.com/owner/repo.git`` (or a local path in tests).
    url: str
    #: The installation token for HTTPS remotes; read per command, so a refreshed token is used.
    token: Callable[[], str] | None = None


@dataclass(frozen=True)
class PushResult:
    pushed: bool
    sha: str
    detail: str


Runner = Callable[..., "subprocess.CompletedProcess[str]"]


class WorkingCopy:
    def __init__(
        self,
        path: Path,
        remote: GitRemote,
        *,
        author_name: str,
        author_email: str,
        run: Runner = subprocess.run,
    ) -> None:
        self.path = path
        self.remote = remote
        self.author_name = author_name
        self.author_email = author_email
        self._run = run

    # --- plumbing --------------------------------------------------------------------------------

    def _env(self, *, authenticated: bool) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.path.parent),
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_AUTHOR_NAME": self.author_name,
            "GIT_AUTHOR_EMAIL": self.author_email,
            "GIT_COMMITTER_NAME": self.author_name,
            "GIT_COMMITTER_EMAIL": self.author_email,
            # No system or global config: the task's behaviour does not depend on the image.
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
        }
        config: dict[str, str] = {"safe.directory": str(self.path)}
        if authenticated and self.remote.token is not None:
            basic = base64.b64encode(f"x-access-token:{self.remote.token()}".encode()).decode()
            config["http.extraHeader"] = f"AUTHORIZATION: basic {basic}"
        env["GIT_CONFIG_COUNT"] = str(len(config))
        for index, (key, value) in enumerate(config.items()):
            env[f"GIT_CONFIG_KEY_{index}"] = key
            env[f"GIT_CONFIG_VALUE_{index}"] = value
        return env

    def _exec(self, args: tuple[str, ...], *, authenticated: bool) -> subprocess.CompletedProcess[str]:
        try:
            return self._run(
                ["git", *args],
                cwd=self.path,
                env=self._env(authenticated=authenticated),
                capture_output=True,
                text=True,
                timeout=GIT_TIMEOUT_SECONDS,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise GitError(f"git {args[0]} took longer than {GIT_TIMEOUT_SECONDS} s") from exc

    def git(self, *args: str, authenticated: bool = False, check_ok: bool = True) -> str:
        """Run ``git args`` in the working copy; its stdout, or GitError with git's stderr."""
        done = self._exec(args, authenticated=authenticated)
        if check_ok and done.returncode != 0:
            words = (done.stderr or done.stdout).strip()
            raise GitError(f"git {' '.join(args[:2])} failed: {words[-2000:]}")
        return done.stdout.strip()

    def _remote_has(self, branch: str) -> bool:
        out = self.git("ls-remote", "--heads", "origin", f"refs/heads/{branch}", authenticated=True)
        return bool(out)

    # --- what the host does ----------------------------------------------------------------------

    def prepare(self, branch: str, base: str) -> str:
        """Check out ``branch`` (from origin when it exists there, else new from ``base``).

        An existing working copy (a woken agent's) is kept: its unpushed commits and
        uncommitted files stay; it is fast-forwarded to what others pushed when it can be.
        Returns a sentence for the agent's prompt about what it found.
        """
        fresh = not (self.path / ".git").exists()
        if fresh:
            self.path.mkdir(parents=True, exist_ok=True)
            self.git("init", "--quiet")
            self.git("remote", "add", "origin", self.remote.url)
        else:
            self.git("remote", "set-url", "origin", self.remote.url)
        self.git("fetch", "--quiet", "--prune", "origin", authenticated=True)
        remote_branch = self._has_ref(f"refs/remotes/origin/{branch}")
        local_branch = self._has_ref(f"refs/heads/{branch}")
        if not local_branch:
            start = f"origin/{branch}" if remote_branch else f"origin/{base}"
            if not self._has_ref(f"refs/remotes/origin/{base}") and not remote_branch:
                raise GitError(f"neither {branch} nor the base branch {base} exists on the remote")
            self.git("checkout", "--quiet", "-B", branch, start)
            if not remote_branch:
                return f"Created branch {branch} from {base}."
            return f"Checked out {branch} from the remote."
        self.git("checkout", "--quiet", branch)
        if not remote_branch:
            return f"Kept your working copy of {branch} (not on the remote yet)."
        ahead, behind = self._divergence(branch)
        if behind and not ahead and not self._dirty():
            self.git("merge", "--quiet", "--ff-only", f"origin/{branch}")
            return f"Kept your working copy of {branch} and fast-forwarded it by {behind} new commit(s)."
        if behind:
            return (
                f"Kept your working copy of {branch}; the remote has {behind} commit(s) you do not have "
                f"and you have {ahead} it does not: merge origin/{branch} before you push."
            )
        return f"Kept your working copy of {branch}" + (
            f" ({ahead} commit(s) not pushed yet)." if ahead else "."
        )

    def prepare_review(self, ref: str, sha: str) -> str:
        """A detached checkout of a pull request's head (``ref`` is fetched, ``sha`` checked out)."""
        if not (self.path / ".git").exists():
            self.path.mkdir(parents=True, exist_ok=True)
            self.git("init", "--quiet")
            self.git("remote", "add", "origin", self.remote.url)
        self.git("fetch", "--quiet", "origin", f"+{ref}:refs/review/head", authenticated=True)
        target = sha or "refs/review/head"
        self.git("checkout", "--quiet", "--force", "--detach", target)
        self.git("clean", "-fdq")
        return f"The pull request's head {self.head()[:7]} is checked out (read-only)."

    def _has_ref(self, ref: str) -> bool:
        return bool(self.git("rev-parse", "--verify", "--quiet", ref, check_ok=False))

    def _divergence(self, branch: str) -> tuple[int, int]:
        out = self.git("rev-list", "--left-right", "--count", f"{branch}...origin/{branch}")
        ahead, behind = out.split()
        return int(ahead), int(behind)

    def _dirty(self) -> bool:
        return bool(self.git("status", "--porcelain"))

    def head(self) -> str:
        return self.git("rev-parse", "HEAD")

    def current_branch(self) -> str:
        return self.git("rev-parse", "--abbrev-ref", "HEAD")

    def commit_all(self, message: str) -> str | None:
        """Commit every change in the working copy; the new sha, or None when nothing changed."""
        if not self._dirty():
            return None
        self.git("add", "--all")
        self.git("commit", "--quiet", "--no-verify", "-m", message)
        return self.head()

    def push(self, caller: Caller, branch: str) -> PushResult:
        """Push ``branch`` (the caller's own, checked first) to origin, fast-forward only."""
        check(caller, Action.PUSH, branch=branch)
        if not self._has_ref(f"refs/heads/{branch}"):
            raise GitError(f"there is no local branch {branch} to push")
        sha = self.git("rev-parse", f"refs/heads/{branch}")
        done = self._exec(
            ("push", "--porcelain", "origin", f"refs/heads/{branch}:refs/heads/{branch}"), authenticated=True
        )
        if done.returncode == 0:
            up_to_date = "[up to date]" in done.stdout
            return PushResult(
                not up_to_date, sha, "already up to date" if up_to_date else f"pushed {sha[:7]}"
            )
        words = (done.stderr + "\n" + done.stdout).strip()
        if "rejected" in words or "non-fast-forward" in words or "fetch first" in words:
            return PushResult(
                False,
                sha,
                f"rejected: {branch} on the remote has commits you do not have. Fetch origin and merge "
                f"origin/{branch} into your branch (never force), then push again.",
            )
        raise GitError(f"git push failed: {words[-2000:]}")

    def save(self, caller: Caller, branch: str, message: str) -> str:
        """Commit and push work in progress (before sleeping or handing over); what happened, in words."""
        try:
            if self.current_branch() != branch:
                self.git("checkout", "--quiet", branch)
            sha = self.commit_all(message)
            if sha is None and not self.git("rev-list", "-n", "1", branch, "--not", "--remotes"):
                return "nothing to save: no commits the remote lacks"
            result = self.push(caller, branch)
        except (GitError, SquadronError) as exc:
            return f"work in progress not saved: {exc}"
        committed = f"committed {sha[:7]}, " if sha else ""
        return f"{committed}{result.detail}"
