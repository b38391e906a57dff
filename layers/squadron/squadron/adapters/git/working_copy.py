"""The agent's checkout: git here runs as the agent's user, confined, without credentials.

Branches cross between it and the framework's clone as bundles (data): the framework's refs as a
bundle the agent's git fetches (the agent's own file, mode 0400), the agent's branch as a bundle
its git writes to a pipe, which the clone imports, checks and pushes.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from squadron.adapters.confinement import TRUSTED_CWD, AgentUser
from squadron.adapters.git.agent_code import HOST_SIDE, agent_code_off
from squadron.adapters.git.base import (
    GIT_TIMEOUT_SECONDS,
    SHA,
    GitError,
    PushResult,
    Runner,
    check_branch,
    git_env,
    git_words,
)
from squadron.adapters.git.framework_clone import FrameworkClone
from squadron.adapters.secret_scan import find_secrets, find_secrets_in_diff
from squadron.domain.permissions import Action, Caller, check
from squadron.domain.threats import Finding, refusal
from squadron.errors import SquadronError

#: The most a branch's new history may weigh when it crosses from the agent to the framework.
MAX_BUNDLE_BYTES = 512 * 1024 * 1024


def _hand_over(fd: int, user: AgentUser) -> None:
    """Make the open bundle ``fd`` readable by the agent's user and by no other uid.

    The transfers directory is shared by a repository's agents (and, in the local stack, other
    repositories' agents can reach it): a bundle readable by all would give any uid that learned
    its random name (another agent's git command line shows in ``/proc``) that branch's objects.
    Without a separate user (the host runs as the agent) the file stays the host's own, 0400.
    """
    if user.uid is not None and user.gid is not None:
        os.fchown(fd, user.uid, user.gid)
    os.fchmod(fd, 0o400)


class WorkingCopy:
    """The agent's checkout: git here runs as the agent's user, without credentials."""

    def __init__(
        self,
        path: Path,
        clone: FrameworkClone,
        *,
        author_name: str,
        author_email: str,
        user: AgentUser | None = None,
        home: Path | None = None,
        transfers: Path | None = None,
        run: Runner = subprocess.run,
    ) -> None:
        self.path = path
        self.clone = clone
        self.author_name = author_name
        self.author_email = author_email
        self.user = user or AgentUser()
        self.home = home or path.parent
        self.transfers = transfers or path.parent
        self._run = run
        #: The base branch the working copy was prepared from (an untouched branch is not pushed).
        self._base = "main"
        #: The path prefixes this working copy's pushes may change (empty: any path).
        self.only_under: tuple[str, ...] = ()

    # --- plumbing --------------------------------------------------------------------------------

    def _env(self, config: Mapping[str, str]) -> dict[str, str]:
        env = git_env(str(self.home), {"safe.directory": str(self.path), **HOST_SIDE, **config})
        env.update(
            {
                "GIT_AUTHOR_NAME": self.author_name,
                "GIT_AUTHOR_EMAIL": self.author_email,
                "GIT_COMMITTER_NAME": self.author_name,
                "GIT_COMMITTER_EMAIL": self.author_email,
            }
        )
        return env

    def _as_agent(
        self,
        program: str,
        args: Sequence[str],
        *,
        text: bool = True,
        config: Mapping[str, str] | None = None,
        enter: bool = True,
    ) -> subprocess.CompletedProcess[Any]:
        """``program args`` in the working copy as the agent's user, confined like the Copilot CLI
        (setpriv: no groups, no capabilities, ``no_new_privs``). The process starts in a directory
        of the host's and its shell enters the working copy only after the drop, so a link the
        agent put in place of ``work`` leads where the agent itself may go, nowhere else."""
        executable, argv = self.user.command(program, *args, cwd=str(self.path) if enter else None)
        try:
            done: subprocess.CompletedProcess[Any] = self._run(
                [executable, *argv],
                cwd=TRUSTED_CWD,
                env=self._env(config or {}),
                umask=0o077,
                capture_output=True,
                text=text,
                timeout=GIT_TIMEOUT_SECONDS,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise GitError(
                f"{program} {args[0] if args else ''} took longer than {GIT_TIMEOUT_SECONDS} s"
            ) from exc
        return done

    def _exec(
        self, args: Sequence[str], *, text: bool = True, config: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[Any]:
        """``git args`` in the working copy, as the agent's user, with none of the agent's code:
        every program its configuration names is overridden (:data:`HOST_SIDE`,
        :func:`agent_code_off`), and ``config`` (the host's own settings for this command) last."""
        return self._as_agent("git", args, text=text, config={**self._agent_code_off(), **(config or {})})

    def _agent_code_off(self) -> dict[str, str]:
        """The overrides of every program the agent's configuration names now (read as the agent,
        included files followed; reading configuration runs nothing). What the agent changes
        between this read and the command it is for, it changes in a git of its own uid, confined
        like its shell: it gains nothing it could not run itself."""
        done = self._as_agent("git", ["config", "--null", "--name-only", "--list"])
        return agent_code_off([name for name in str(done.stdout).split("\0") if name])

    def git(self, *args: str, check_ok: bool = True) -> str:
        """Run ``git args`` in the working copy; its stdout, or GitError with git's stderr."""
        return self._checked(args, check_ok=check_ok)

    def _checked(
        self, args: Sequence[str], *, check_ok: bool = True, config: Mapping[str, str] | None = None
    ) -> str:
        done = self._exec(args, config=config)
        if check_ok and done.returncode != 0:
            raise GitError(f"git {' '.join(args[:2])} failed: {git_words(done)}")
        return str(done.stdout).strip()

    def _transfer_path(self) -> Path:
        self.transfers.mkdir(mode=0o711, parents=True, exist_ok=True)
        return self.transfers / f"{secrets.token_hex(16)}.bundle"

    def _receive(self, refs: Sequence[str], refspecs: Sequence[str]) -> None:
        """The framework's ``refs`` into the working copy (as a bundle the agent's git fetches)."""
        bundle = self._transfer_path()
        try:
            self.clone.bundle(refs, bundle)
            fd = os.open(bundle, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                _hand_over(fd, self.user)
            finally:
                os.close(fd)
            # The bundle's own path is the longest prefix any ``url.*.insteadOf`` can match: it
            # leads to itself, never to a transport the agent named.
            self._checked(
                ["fetch", "--quiet", "--no-tags", str(bundle), *refspecs],
                config={f"url.{bundle}.insteadOf": str(bundle)},
            )
        finally:
            bundle.unlink(missing_ok=True)

    def _fresh(self) -> bool:
        """Whether the working copy has no ``.git`` yet (looked at as the agent, never as root)."""
        return self._as_agent("test", ["-e", ".git"]).returncode != 0

    def _init(self) -> bool:
        """Create the working copy if it is not there; whether it was."""
        made = self._as_agent("mkdir", ["-p", "--", str(self.path)], enter=False)
        if made.returncode != 0:
            raise GitError(f"the working copy cannot be made: {git_words(made)}")
        fresh = self._fresh()
        if fresh:
            self.git("init", "--quiet")
            # The real URL, without credentials: fetching from the shell fails on a private
            # repository (the framework brings new commits at every push).
            self.git("remote", "add", "origin", self.clone.remote.url)
        return fresh

    def _has_ref(self, ref: str) -> bool:
        return bool(self.git("rev-parse", "--verify", "--quiet", ref, check_ok=False))

    # --- what the host does ----------------------------------------------------------------------

    def prepare(self, branch: str, base: str) -> str:
        """Check out ``branch`` (from origin when it exists there, else new from ``base``).

        An existing working copy (a woken agent's) is kept: its unpushed commits and
        uncommitted files stay; it is fast-forwarded to what others pushed when it can be.
        Returns a sentence for the agent's prompt about what it found.
        """
        check_branch(branch)
        self._base = check_branch(base)
        self.clone.fetch_branches(branch, base)
        remote_branch = self.clone.sha(f"refs/heads/{branch}") is not None
        if not remote_branch and self.clone.sha(f"refs/heads/{base}") is None:
            raise GitError(f"neither {branch} nor the base branch {base} exists on the remote")
        fresh = self._init()
        refs = [f"refs/heads/{name}" for name in (branch, base) if self.clone.sha(f"refs/heads/{name}")]
        self._receive(refs, ["+refs/heads/*:refs/remotes/origin/*"])
        local_branch = not fresh and self._has_ref(f"refs/heads/{branch}")
        if not local_branch:
            start = f"origin/{branch}" if remote_branch else f"origin/{base}"
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

    def prepare_review(
        self, ref: str, sha: str, *, base: str = "main", squash: Callable[[str], str] | None = None
    ) -> str:
        """A detached checkout of a pull request's head (``ref`` is fetched, ``sha`` checked out).

        ``squash`` (a pull request by someone without write access): the agent gets the head's
        files as one commit on the point where the pull request left ``base``, whose message is
        ``squash`` of the pull request's own commit messages (withheld or fenced by the caller):
        the author's commits, their messages and names, never reach the working copy.
        """
        self.clone.fetch(
            f"+{ref}:refs/review/head", *([f"+refs/heads/{base}:refs/review/base"] if squash else [])
        )
        self._init()
        target = sha if sha and SHA.fullmatch(sha) else "refs/review/head"
        if squash is None:
            self._receive(["refs/review/head"], ["+refs/review/head:refs/review/head"])
            self.git("checkout", "--quiet", "--force", "--detach", target)
            self.git("clean", "-fdq")
            return f"The pull request's head {self.head()[:7]} is checked out (read-only)."
        self.clone.git("update-ref", "refs/review/shown", self._squashed(target, squash))
        self._receive(["refs/review/shown"], ["+refs/review/shown:refs/review/head"])
        self.git("checkout", "--quiet", "--force", "--detach", "refs/review/head")
        self.git("clean", "-fdq")
        return (
            f"The pull request's changes are checked out as one commit ({self.head()[:7]}) on the commit "
            "it started from (read-only; `git diff HEAD~1` shows them): its author has no write access, "
            "so its own commits are not in your working copy."
        )

    def _squashed(self, target: str, squash: Callable[[str], str]) -> str:
        """A commit (in the framework's clone) of ``target``'s files on its fork point from the base."""
        fork = self.clone.git("merge-base", "refs/review/base", target, check_ok=False)
        since = [f"^{fork}"] if SHA.fullmatch(fork) else []
        messages = self.clone.git("log", "--format=%an <%ae>:%n%B", target, *since)
        identity = ["-c", f"user.name={self.author_name}", "-c", f"user.email={self.author_email}"]
        parent = ["-p", fork] if SHA.fullmatch(fork) else []
        return self.clone.git(*identity, "commit-tree", f"{target}^{{tree}}", *parent, "-m", squash(messages))

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

    def _send(self, branch: str) -> Path:
        """The agent's ``branch`` as a bundle file the host owns (written by the agent's git to a pipe)."""
        known = [
            f"^{ref}"
            for ref in (f"refs/remotes/origin/{branch}",)
            if self.clone.sha(f"refs/heads/{branch}") and self._has_ref(ref)
        ]
        for attempt in (known, []):
            done = self._exec(
                ["bundle", "create", "--quiet", "-", f"refs/heads/{branch}", *attempt], text=False
            )
            if done.returncode != 0:
                raise GitError(f"git bundle failed: {git_words(done)}")
            data = done.stdout or b""
            if len(data) > MAX_BUNDLE_BYTES:
                raise GitError(
                    f"{branch}'s new history is {len(data) // (1024 * 1024)} MiB, over the "
                    f"{MAX_BUNDLE_BYTES // (1024 * 1024)} MiB a push may carry"
                )
            path = self._transfer_path()
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            try:
                self.clone.git("bundle", "verify", "--quiet", str(path))
            except GitError:
                path.unlink(missing_ok=True)
                if attempt:
                    continue  # its origin ref named a commit the framework lacks: send it whole
                raise
            return path
        raise GitError("unreachable")  # pragma: no cover

    def push(self, caller: Caller, branch: str, *, only_under: tuple[str, ...] | None = None) -> PushResult:
        """Push ``branch`` (the caller's own, checked first) to origin, fast-forward only.

        ``only_under``: the path prefixes the branch may change (compared with the base branch in
        the framework's own clone, never with what the agent's git says); a push that changes
        anything else is refused, naming the first such path.
        """
        check(caller, Action.PUSH, branch=branch)
        check_branch(branch)
        if not self._has_ref(f"refs/heads/{branch}"):
            raise GitError(f"there is no local branch {branch} to push")
        local = self.git("rev-parse", f"refs/heads/{branch}")
        if SHA.fullmatch(local) and self.clone.sha(f"refs/heads/{branch}") == local:
            return PushResult(False, local, "already up to date")
        bundle = self._send(branch)
        try:
            sha = self.clone.import_bundle(bundle, f"refs/heads/{branch}", f"refs/squadron/push/{branch}")
        finally:
            bundle.unlink(missing_ok=True)
        if self.clone.sha(f"refs/heads/{branch}") == sha:
            return PushResult(False, sha, "already up to date")
        only_under = self.only_under if only_under is None else only_under
        outside = self._outside(sha, only_under) if only_under else []
        if outside:
            return PushResult(
                False,
                sha,
                f"refused: your branch changes {outside[0]!r}"
                + (f" and {len(outside) - 1} more path(s)" if len(outside) > 1 else "")
                + f", outside {', '.join(only_under)}, the only paths your role may change. Undo those "
                "changes (commit the undoing) and push again.",
            )
        findings = self._secrets(branch, sha)
        if findings:
            return PushResult(False, sha, f"refused, not pushed: {refusal(findings)}", secret=True)
        done = self.clone.push(sha, branch)
        if done.returncode == 0:
            up_to_date = "[up to date]" in done.stdout
            self.clone.git("update-ref", f"refs/heads/{branch}", sha)
            self.git("update-ref", f"refs/remotes/origin/{branch}", sha)
            return PushResult(
                not up_to_date, sha, "already up to date" if up_to_date else f"pushed {sha[:7]}"
            )
        words = git_words(done)
        if "rejected" in words or "non-fast-forward" in words or "fetch first" in words:
            self.clone.fetch_branches(branch, self._base)
            if self.clone.sha(f"refs/heads/{branch}"):
                self._receive(
                    [f"refs/heads/{branch}"], [f"+refs/heads/{branch}:refs/remotes/origin/{branch}"]
                )
            return PushResult(
                False,
                sha,
                f"rejected: {branch} on the remote has commits you do not have. They are in "
                f"origin/{branch} now: merge origin/{branch} into your branch (never force), then push again.",
            )
        raise GitError(f"git push failed: {words}")

    def _secrets(self, branch: str, sha: str) -> list[Finding]:
        """Secrets in the lines the commits up to ``sha`` add to what the remote has of ``branch``
        (or its base): scanned in the framework's clone before the push, kinds and places only."""
        since = self.clone.sha(f"refs/heads/{branch}") or self.clone.sha(f"refs/heads/{self._base or 'main'}")
        if since is None:
            return []
        # Each commit's own diff (a secret added and removed again is still in the history), every
        # file as text (a secret beside a NUL byte, or under a ``-diff`` attribute, is read too).
        diff = self.clone.git(
            "log",
            "-p",
            "--text",
            "--no-textconv",
            "--no-color",
            "--no-ext-diff",
            "--no-renames",
            "-U0",
            "--format=",
            f"{since}..{sha}",
        )
        # And each commit's words: its message and the names it carries go to GitHub as they are.
        words = self.clone.git("log", "-z", "--format=%H%n%an <%ae>%n%cn <%ce>%n%B", f"{since}..{sha}")
        texts = [
            (f"message of commit {record[:7]}", record.partition("\n")[2])
            for record in words.split("\0")
            if record.strip()
        ]
        return sorted({*find_secrets_in_diff(diff), *find_secrets(texts)})

    def _outside(self, sha: str, prefixes: tuple[str, ...]) -> list[str]:
        """The paths ``sha`` changes since it left the base branch that are under none of ``prefixes``."""
        base = self._base or "main"
        if self.clone.sha(f"refs/heads/{base}") is None:
            return ["(the base branch is unknown)"]
        names = self.clone.git("diff", "--name-only", "-z", "--no-renames", f"refs/heads/{base}...{sha}")
        return [name for name in names.split("\0") if name and not name.startswith(prefixes)]

    def save(self, caller: Caller, branch: str, message: str) -> str:
        """Commit and push work in progress (before sleeping or handing over); what happened, in words."""
        try:
            if self.current_branch() != branch:
                self.git("checkout", "--quiet", branch)
            sha = self.commit_all(message)
            local = self.git("rev-parse", f"refs/heads/{branch}")
            remote = self.clone.sha(f"refs/heads/{branch}") or self.clone.sha(f"refs/heads/{self._base}")
            if sha is None and remote == local:
                return "nothing to save: no commits the remote lacks"
            result = self.push(caller, branch)
        except (GitError, SquadronError) as exc:
            return f"work in progress not saved: {exc}"
        committed = f"committed {sha[:7]}, " if sha else ""
        return f"{committed}{result.detail}"
