"""Who runs what inside an agent task, and where each agent's files live.

Two users share a task. The host (this process: the framework, holding the
launch secret and the GitHub token) runs as root inside the container. The
Copilot CLI, every tool it runs (the model's shell included) and every git
command in the agent's working copy run as the agent's own unprivileged user: a
uid the registry gives this agent alone, with no supplementary groups, no
capabilities and ``no_new_privs``. That user cannot read the host's environment
or memory (``/proc/<pid>/environ`` and ``mem`` belong to root), cannot signal it,
and finds nothing worth stealing in its own environment.

On the shared volume (EFS in ECS) every agent has one directory, owned by its
user and mode 0700, holding its working copy and its Copilot home (so no SQLite
file is ever shared between tasks); the framework's clone of its repository sits
beside it, owned by root, mode 0700, where the agent's user cannot write::

    <root>/                       root 0711 (no listing)
      agents/<agent id>/          the agent's uid 0700
        work/                     its working copy
        copilot/                  COPILOT_HOME: its sessions
        home/                     HOME of its processes
      framework/                  root 0700
        <agent id>.git            the framework's bare clone (tokens are used only here)

Where the host is not root (a developer's machine running the local stack as
themselves) there is one user: :attr:`AgentUser.separated` is False, and the
layout is the same without the ownership.
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from squadron.errors import SquadronError

#: Where util-linux's setpriv is (Debian, and the agent image).
SETPRIV = "/usr/bin/setpriv"


class ConfinementError(SquadronError):
    """The agent's directories or user cannot be set up safely."""


@dataclass(frozen=True)
class AgentUser:
    """The POSIX user the agent's own processes run as (None: the host's own user)."""

    uid: int | None = None
    gid: int | None = None

    @classmethod
    def for_uid(cls, uid: int, *, separate: bool | None = None) -> AgentUser:
        """The agent's user: ``uid`` when the host may switch to it (it runs as root), else itself."""
        if separate is None:
            separate = os.geteuid() == 0
        return cls(uid, uid) if separate else cls()

    @property
    def separated(self) -> bool:
        return self.uid is not None

    def run_options(self) -> dict[str, Any]:
        """``subprocess`` arguments that start a process as this user (nothing when not separated)."""
        if self.uid is None or self.gid is None:
            return {"umask": 0o077}
        return {"user": self.uid, "group": self.gid, "extra_groups": [], "umask": 0o077}

    def command(self, program: str, *args: str) -> tuple[str, list[str]]:
        """(executable, arguments) that run ``program`` as this user: setpriv drops to the agent's
        uid and gid with no groups, no capabilities (inheritable, ambient or bounding) and
        ``no_new_privs``, so no setuid binary can bring them back."""
        if self.uid is None or self.gid is None:
            return program, list(args)
        return SETPRIV, [
            f"--reuid={self.uid}",
            f"--regid={self.gid}",
            "--clear-groups",
            "--inh-caps=-all",
            "--ambient-caps=-all",
            "--bounding-set=-all",
            "--no-new-privs",
            "--",
            program,
            *args,
        ]


@dataclass(frozen=True)
class AgentDirs:
    root: Path
    agent_id: str

    @property
    def agent(self) -> Path:
        return self.root / "agents" / self.agent_id

    @property
    def work(self) -> Path:
        return self.agent / "work"

    @property
    def copilot_home(self) -> Path:
        return self.agent / "copilot"

    @property
    def home(self) -> Path:
        return self.agent / "home"

    @property
    def framework_clone(self) -> Path:
        return self.root / "framework" / f"{self.agent_id}.git"

    @property
    def transfers(self) -> Path:
        """Where the host hands the agent's user a bundle (0711: files are found by name only)."""
        return self.root / "transfers"


def prepare(dirs: AgentDirs, user: AgentUser) -> None:
    """Create the layout above (idempotent) and give the agent's directory to its user.

    Refuses a directory of the agent's that is a symbolic link, or owned by a user that is
    neither the agent's nor the host's: another agent's files are never handed over.
    """
    _private_dir(dirs.root, 0o711)
    _private_dir(dirs.root / "agents", 0o711)
    _private_dir(dirs.root / "framework", 0o700)
    _private_dir(dirs.transfers, 0o711)
    agent = dirs.agent
    with contextlib.suppress(FileExistsError):
        agent.mkdir(mode=0o700)
    info = os.lstat(agent)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise ConfinementError(f"{agent} is not a directory of its own")
    if user.separated:
        assert user.uid is not None and user.gid is not None
        if info.st_uid not in (user.uid, os.geteuid()):
            raise ConfinementError(
                f"{agent} belongs to uid {info.st_uid}, not to {dirs.agent_id}'s {user.uid}"
            )
        fd = os.open(agent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            os.fchown(fd, user.uid, user.gid)
            os.fchmod(fd, 0o700)
            for name in ("work", "copilot", "home"):
                try:
                    os.mkdir(name, 0o700, dir_fd=fd)
                except FileExistsError:
                    continue  # the agent's own since its first task: left as it made it
                os.chown(name, user.uid, user.gid, dir_fd=fd, follow_symlinks=False)
        finally:
            os.close(fd)
    else:
        for path in (dirs.work, dirs.copilot_home, dirs.home):
            path.mkdir(mode=0o700, exist_ok=True)


def _private_dir(path: Path, mode: int) -> None:
    """A directory owned by the host with exactly ``mode`` (created with its parents if missing)."""
    path.mkdir(parents=True, exist_ok=True)
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise ConfinementError(f"{path} is not a directory")
    if info.st_uid != os.geteuid():
        raise ConfinementError(f"{path} belongs to uid {info.st_uid}, not to the host")
    if stat.S_IMODE(info.st_mode) != mode:
        os.chmod(path, mode)


def traversable(path: Path) -> Path | None:
    """The first ancestor of ``path`` another user cannot pass through (None: all can)."""
    for parent in [path, *path.parents]:
        try:
            mode = os.stat(parent).st_mode
        except FileNotFoundError:
            continue
        if not mode & stat.S_IXOTH:
            return parent
    return None
