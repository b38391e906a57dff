"""Who runs what inside an agent task, and where each agent's files live.

Two users share a task. The host (this process: the framework, holding the
launch secret and the GitHub token) runs as root inside the container. The
Copilot CLI, every tool it runs (the model's shell included) and every git
command in the agent's working copy run as the agent's own unprivileged user: a
uid the registry gives this agent alone, with no supplementary groups, no
capabilities (an empty bounding set), ``no_new_privs`` and umask 077
(:meth:`AgentUser.command`). That user cannot read the host's environment
or memory (``/proc/<pid>/environ`` and ``mem`` belong to root), cannot signal it,
and finds nothing worth stealing in its own environment.

The host never acts as root inside the agent's directory, which the agent can rewrite between
any two of the host's steps (a link in place of ``work``, flipped at will): a process for the
agent starts in ``/`` and enters the agent's directory only after the drop (``subprocess``'s
``cwd`` is entered as root, before it), and what the host itself does there (:func:`prepare`) goes
through a descriptor of the agent's directory (whose parents are the host's) opened without
following a link, and never follows one below it. Trees the framework makes are private at every
level, not only at their top: a process whose cwd got inside reads by relative paths.

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
      trash/                      root 0700: finished agents' directories on their way out

A finished agent's directory and clone leave the volume a retention after it finished
(:mod:`squadron.domain.retention`): the janitor moves them into ``trash/`` (:func:`retire`, a
rename on the same volume, so the agent's place is free at once) and empties it
(:func:`empty_trash`) while its own agent works. Neither ever follows a symbolic link.

Where the host is not root (a developer's machine running the local stack as
themselves) there is one user: :attr:`AgentUser.separated` is False, and the
layout is the same without the ownership.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import secrets
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from squadron.domain.agents import RegistryError, parse_agent_id
from squadron.errors import SquadronError

logger = logging.getLogger(__name__)

#: Where util-linux's setpriv is (Debian, and the agent image).
SETPRIV = "/usr/bin/setpriv"
#: The shell that enters an agent's directory after the drop.
SHELL = "/bin/sh"
#: Where a process started for an agent begins, before its shell enters the agent's directory.
TRUSTED_CWD = "/"
#: ``sh -c`` scripts: private files, then (``$1``) the directory to enter, then the program.
_UMASK = 'umask 077 && exec "$@"'
_ENTER = 'umask 077 && cd -- "$1" && shift && exec "$@"'
#: The directories of the layout under the root.
AGENTS = "agents"
FRAMEWORK = "framework"
TRASH = "trash"
#: Directories opened on the way down: never through a link.
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


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

    def command(self, program: str, *args: str, cwd: str | None = None) -> tuple[str, list[str]]:
        """(executable, arguments) that run ``program`` as this user, in ``cwd`` when given.

        setpriv drops to the agent's uid and gid with no groups, no capabilities (inheritable,
        ambient or bounding) and ``no_new_privs``, so no setuid binary or file capability can bring
        them back. ``cwd`` is entered by a shell *after* the drop (with umask 077): the caller
        starts the process in a directory of its own (:data:`TRUSTED_CWD`), never in the agent's,
        since ``subprocess``'s ``cwd`` is entered before the drop and would follow the agent's
        links as root (FINDINGS). The agent's own permissions decide where its path leads.
        """
        inner = [program, *args]
        if cwd is not None:
            inner = [SHELL, "-c", _ENTER, "squadron-enter", cwd, *inner]
        elif self.uid is not None:
            inner = [SHELL, "-c", _UMASK, "squadron-enter", *inner]
        if self.uid is None or self.gid is None:
            return inner[0], inner[1:]
        return SETPRIV, [
            f"--reuid={self.uid}",
            f"--regid={self.gid}",
            "--clear-groups",
            "--inh-caps=-all",
            "--ambient-caps=-all",
            "--bounding-set=-all",
            "--no-new-privs",
            "--",
            *inner,
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


# --- finished agents' state leaves the volume ---------------------------------------------------


def _open_dir(name: str, dir_fd: int | None, *, shown: Path) -> int | None:
    """A directory under ``dir_fd`` opened without following a link (None: there is none)."""
    try:
        return os.open(name, _DIRECTORY, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise ConfinementError(f"{shown} is a link or not a directory: left as found") from exc
        raise


def _trash(root_fd: int, root: Path) -> int:
    """The trash under the root, the host's own and private (created if missing)."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(TRASH, 0o700, dir_fd=root_fd)
    fd = _open_dir(TRASH, root_fd, shown=root / TRASH)
    if fd is None:
        raise ConfinementError(f"{root / TRASH} vanished")
    info = os.fstat(fd)
    if info.st_uid != os.geteuid():
        os.close(fd)
        raise ConfinementError(f"{root / TRASH} belongs to uid {info.st_uid}, not to the host")
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.fchmod(fd, 0o700)
    return fd


def retire(root: Path, agent_id: str) -> tuple[str, ...]:
    """Move ``agent_id``'s directory and the framework's clone of it into the trash; what moved.

    Every step is relative to a directory opened under the root without following a link, so
    nothing outside the root is ever reached. What is gone already is fine (nothing moves).
    Refused with :class:`ConfinementError`, touching nothing: an id that is not an agent's (a
    path, ``..``), a link or anything but a directory where its directory or clone belongs, or a
    link in place of the agents' or the framework's directory.
    """
    try:
        parse_agent_id(agent_id)
    except RegistryError as exc:
        raise ConfinementError(f"not an agent's directory: {agent_id!r}") from exc
    root = root.resolve()  # the configured root may be reached through a link; nothing below it
    root_fd = _open_dir(str(root), None, shown=root)
    if root_fd is None:
        return ()
    opened: list[int] = [root_fd]
    try:
        found: list[tuple[int, str]] = []
        for parent, name in ((AGENTS, agent_id), (FRAMEWORK, f"{agent_id}.git")):
            parent_fd = _open_dir(parent, root_fd, shown=root / parent)
            if parent_fd is None:
                continue
            opened.append(parent_fd)
            try:
                info = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            if not stat.S_ISDIR(info.st_mode):
                raise ConfinementError(f"{root / parent / name} is a link or not a directory: left as found")
            found.append((parent_fd, f"{parent}/{name}"))
        if not found:
            return ()
        trash_fd = _trash(root_fd, root)
        opened.append(trash_fd)
        suffix = secrets.token_hex(4)
        for parent_fd, where in found:
            name = where.split("/", 1)[1]
            os.rename(name, f"{name}.{suffix}", src_dir_fd=parent_fd, dst_dir_fd=trash_fd)
        return tuple(where for _, where in found)
    finally:
        for fd in opened:
            os.close(fd)


def empty_trash(root: Path) -> int:
    """Remove everything in the trash (what :func:`retire` moved there, also by a pass that
    died half-way); how many entries went. Links are removed, never followed (shutil.rmtree's
    walk by file descriptors). What fails is logged and left for the next pass."""
    root = root.resolve()
    root_fd = _open_dir(str(root), None, shown=root)
    if root_fd is None:
        return 0
    try:
        trash_fd = _open_dir(TRASH, root_fd, shown=root / TRASH)
        if trash_fd is None:
            return 0
        try:
            removed = 0
            for name in os.listdir(trash_fd):
                try:
                    if stat.S_ISDIR(os.stat(name, dir_fd=trash_fd, follow_symlinks=False).st_mode):
                        shutil.rmtree(name, dir_fd=trash_fd)
                    else:
                        os.unlink(name, dir_fd=trash_fd)
                except FileNotFoundError:
                    continue  # another task's pass is removing it
                except OSError as exc:
                    logger.warning("%s not removed (the next pass tries again): %s", root / TRASH / name, exc)
                    continue
                removed += 1
            return removed
        finally:
            os.close(trash_fd)
    finally:
        os.close(root_fd)
