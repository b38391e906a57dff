"""One local stack per state directory: a lock the first ``squadron local`` takes on its state
directory before it starts anything, held until it stops (the operating system releases it
when the process dies, however it dies).

A second stack on the same directory is refused at once with a message that says which
process holds it; being refused, it owns nothing there, so its stop removes nothing (notably
not the endpoints file the running stack wrote, which ``squadron status --local`` reads).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from squadron.errors import SquadronError

LOCK_FILE = "stack.lock"


class StateInUseError(SquadronError):
    """Another local stack holds the state directory."""


class StateLock:
    """The held lock of one state directory (:meth:`take` it; :meth:`release` it once)."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def take(cls, state_dir: Path) -> StateLock:
        """The lock of ``state_dir``, or StateInUseError naming the process that holds it."""
        path = state_dir / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise StateInUseError(
                f"another `squadron local` (pid {holder}) is running with its state in {state_dir}: "
                "stop it first (Ctrl-C in its terminal), or give this one another --state"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        return cls(path, fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        os.ftruncate(fd, 0)
        os.close(fd)  # closing the last descriptor releases the lock
