"""A bare git repository on disk standing in for a GitHub remote (real git, no network)."""

from __future__ import annotations

import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

IDENTITY = {
    "GIT_AUTHOR_NAME": "Octo Human",
    "GIT_AUTHOR_EMAIL": "octo@example.com",
    "GIT_COMMITTER_NAME": "Octo Human",
    "GIT_COMMITTER_EMAIL": "octo@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "PATH": "/usr/local/bin:/usr/bin:/bin",
}


def let_others_pass(path: Path) -> None:
    """Let other users traverse (never list) every directory down to ``path`` (pytest's are 0700)."""
    for directory in [*reversed(path.parents), path]:
        mode = directory.stat().st_mode
        if not mode & stat.S_IXOTH:
            directory.chmod(mode | stat.S_IXOTH)


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, env=IDENTITY, capture_output=True, text=True, check=True)
    return done.stdout.strip()


@dataclass
class BareRemote:
    """``path`` is the bare repository; ``human`` is a clone a human pushes from."""

    path: Path
    human: Path

    @classmethod
    def create(cls, root: Path, files: dict[str, str] | None = None) -> BareRemote:
        bare = root / "remote.git"
        bare.mkdir(parents=True)
        git(bare, "init", "--quiet", "--bare", "--initial-branch=main")
        human = root / "human"
        human.mkdir()
        git(human, "init", "--quiet", "--initial-branch=main")
        git(human, "remote", "add", "origin", str(bare))
        remote = cls(bare, human)
        remote.commit("main", files or {"README.md": "# octo/repo\n"}, "initial commit")
        return remote

    @property
    def url(self) -> str:
        return str(self.path)

    def commit(self, branch: str, files: dict[str, str], message: str) -> str:
        """A human commits ``files`` on ``branch`` and pushes it; the new sha."""
        git(self.human, "fetch", "--quiet", "origin")
        if git(self.human, "ls-remote", "--heads", "origin", branch):
            git(self.human, "checkout", "--quiet", "-B", branch, f"origin/{branch}")
        elif self._has_head():
            git(self.human, "checkout", "--quiet", "-B", branch, "origin/main")
        for name, text in files.items():
            target = self.human / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        git(self.human, "add", "--all")
        git(self.human, "commit", "--quiet", "-m", message)
        git(self.human, "push", "--quiet", "origin", f"HEAD:refs/heads/{branch}")
        return git(self.human, "rev-parse", "HEAD")

    def _has_head(self) -> bool:
        done = subprocess.run(
            ["git", "rev-parse", "--verify", "--quiet", "HEAD"],
            cwd=self.human,
            env=IDENTITY,
            capture_output=True,
            check=False,
        )
        return done.returncode == 0

    def sha(self, branch: str) -> str | None:
        out = git(self.path, "for-each-ref", "--format=%(objectname)", f"refs/heads/{branch}")
        return out or None

    def show(self, branch: str, path: str) -> str:
        return git(self.path, "show", f"{branch}:{path}")

    def log(self, branch: str) -> list[str]:
        return git(self.path, "log", "--format=%s", branch).splitlines()

    def set_ref(self, ref: str, sha: str) -> None:
        git(self.path, "update-ref", ref, sha)
