"""The host's bare clone of an agent's repository: the only git that talks to GitHub.

It holds only the agent's branch and its base, private at every level (umask 077); the token is
handed to git per command through ``GIT_CONFIG_*`` environment variables, never in argv or a file.
"""

from __future__ import annotations

import base64
import os
import stat
import subprocess
from collections.abc import Sequence
from pathlib import Path

from squadron.adapters.git.base import (
    GIT_TIMEOUT_SECONDS,
    SHA,
    GitError,
    GitRemote,
    Runner,
    check_branch,
    git_env,
    git_words,
)


def _make_private(top: Path) -> None:
    """Take group and other permissions off everything under ``top`` (the host's own tree, which
    no agent can write; links are neither followed nor changed)."""
    for directory, dirs, files, fd in os.fwalk(top, follow_symlinks=False):
        for name in [*dirs, *files]:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISLNK(info.st_mode) or not info.st_mode & 0o077:
                continue
            os.chmod(name, stat.S_IMODE(info.st_mode) & 0o700, dir_fd=fd, follow_symlinks=False)
        if directory == str(top):
            os.chmod(fd, 0o700)


class FrameworkClone:
    """The host's bare clone of the agent's repository: the only git that talks to GitHub."""

    def __init__(self, path: Path, remote: GitRemote, *, run: Runner = subprocess.run) -> None:
        self.path = path
        self.remote = remote
        self._run = run
        #: Whether this clone was found private at every level (checked once per task).
        self._private = False

    def _env(self, *, authenticated: bool, push: bool = False) -> dict[str, str]:
        config = {
            "safe.directory": str(self.path),
            # Objects that come from the agent are checked like a server checks a push.
            "transfer.fsckObjects": "true",
            "core.hooksPath": os.devnull,
            "core.attributesFile": os.devnull,
            "protocol.allow": "never",
            "protocol.https.allow": "always",
            "protocol.file.allow": "always",
        }
        token = (self.remote.push_token or self.remote.token) if push else self.remote.token
        if authenticated and token is not None:
            basic = base64.b64encode(f"x-access-token:{token()}".encode()).decode()
            config["http.extraHeader"] = f"AUTHORIZATION: basic {basic}"
        return git_env(str(self.path), config)

    def git(
        self, *args: str, authenticated: bool = False, check_ok: bool = True, stdin: str | None = None
    ) -> str:
        try:
            done = self._run(
                ["git", "--git-dir", str(self.path), *args],
                cwd=self.path,
                env=self._env(authenticated=authenticated),
                input=stdin,
                umask=0o077,
                capture_output=True,
                text=True,
                timeout=GIT_TIMEOUT_SECONDS,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise GitError(f"git {args[0]} took longer than {GIT_TIMEOUT_SECONDS} s") from exc
        if check_ok and done.returncode != 0:
            raise GitError(f"git {' '.join(args[:2])} failed: {git_words(done)}")
        return str(done.stdout).strip()

    def ensure(self) -> None:
        """The clone exists, private at every level (git runs with umask 077; a clone made before
        that had 0755 directories inside, readable by any process whose cwd got there)."""
        if not (self.path / "HEAD").exists():
            self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(self.path, 0o700)
            self.git("init", "--quiet", "--bare")
        elif not self._private:
            _make_private(self.path)
        self._private = True
        self.git("config", "remote.origin.url", self.remote.url)

    def fetch(self, *refspecs: str) -> None:
        """Fetch from GitHub (the token is used here only)."""
        self.ensure()
        self.git("fetch", "--quiet", "--prune", "--no-tags", self.remote.url, *refspecs, authenticated=True)

    def fetch_branches(self, *names: str) -> None:
        """Fetch the branches ``names`` (an agent's own and its base) that are on the remote, and
        keep no other branch here: the clone holds only what its agent may be given.

        A bundle from the agent is checked for connectivity against this clone, so a commit whose
        parent (or a delta whose base) is an object the agent was never given passes when the
        clone has that object, and the next bundle to the agent hands over its whole history:
        another branch's files, for an agent that learned one of its commit ids. A branch the
        clone held before (an older release fetched them all) is dropped with its objects.
        """
        self.ensure()
        wanted = {f"refs/heads/{check_branch(name)}" for name in names}
        listed = self.git("ls-remote", self.remote.url, *sorted(wanted), authenticated=True)
        found = sorted({line.split("\t", 1)[1] for line in listed.splitlines() if "\t" in line} & wanted)
        if found:
            self.git(
                "fetch",
                "--quiet",
                "--no-tags",
                self.remote.url,
                *(f"+{ref}:{ref}" for ref in found),
                authenticated=True,
            )
        self._forget_other_branches(set(found))

    def _forget_other_branches(self, keep: set[str]) -> None:
        """Delete every branch (and pushed branch) but ``keep``; their objects go with them."""
        kept = {f"refs/squadron/push/{ref.removeprefix('refs/heads/')}" for ref in keep} | keep
        refs = self.git("for-each-ref", "--format=%(refname)", "refs/heads/", "refs/squadron/push/")
        others = [ref for ref in refs.splitlines() if ref and ref not in kept]
        if not others:
            return
        self.git("update-ref", "--stdin", stdin="".join(f"delete {ref}\n" for ref in others))
        self.git("-c", "gc.reflogExpire=now", "gc", "--quiet", "--prune=now")

    def sha(self, ref: str) -> str | None:
        out = self.git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check_ok=False)
        return out if SHA.fullmatch(out) else None

    def bundle(self, refs: Sequence[str], out: Path) -> None:
        self.git("bundle", "create", "--quiet", str(out), *refs)

    def import_bundle(self, bundle: Path, source_ref: str, target_ref: str) -> str:
        """Fetch ``source_ref`` of an agent's bundle into ``target_ref``; the commit it names."""
        self.git("bundle", "verify", "--quiet", str(bundle))
        self.git("fetch", "--quiet", "--no-tags", str(bundle), f"+{source_ref}:{target_ref}")
        sha = self.sha(target_ref)
        if sha is None:
            raise GitError(f"the agent's bundle has no commit for {source_ref}")
        return sha

    def push(self, sha: str, branch: str) -> subprocess.CompletedProcess[str]:
        """Push ``sha`` to the remote's ``branch`` (fast-forward only): git's own answer."""
        try:
            done: subprocess.CompletedProcess[str] = self._run(
                [
                    "git",
                    "--git-dir",
                    str(self.path),
                    "push",
                    "--porcelain",
                    "--no-verify",
                    self.remote.url,
                    f"{sha}:refs/heads/{check_branch(branch)}",
                ],
                cwd=self.path,
                env=self._env(authenticated=True, push=True),
                umask=0o077,
                capture_output=True,
                text=True,
                timeout=GIT_TIMEOUT_SECONDS,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise GitError(f"git push took longer than {GIT_TIMEOUT_SECONDS} s") from exc
        return done
