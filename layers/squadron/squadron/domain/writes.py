"""An agent task's GitHub writes, each carried out once however often its request arrives.

The agent host asks the gateway for every write (a comment, an issue, a review, ...). The
request can arrive twice: the task's transport retries an invocation whose answer it never got
(a read timeout), though the gateway carried it out. So the host names each write with a key
(:func:`write_key`: its launch and the write's number in the task), and the gateway

1. claims the key in the registry before it calls GitHub (one conditional put, kept
   :data:`WRITE_RETENTION`); the first claim carries the write out, marking what it creates with
   the key (:func:`squadron.domain.effects.marked`), and keeps GitHub's answer with the claim;
2. answers a request whose key was claimed before with the kept answer; without one (the first
   request died between GitHub and the registry), it looks for what the first created, by its
   marker (written by the App only), and carries the write out only if nothing is there.

Writes GitHub itself makes idempotent (labels, assignees, a commit status, a pull request for a
head that has one) need no marker; a second request finds the answer kept or repeats them
harmlessly.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

#: How long a claimed write is remembered (a retried invocation comes within seconds).
WRITE_RETENTION: Final = timedelta(days=1)
#: GitHub's answer is kept with the claim up to this size (compressed); a larger one is found
#: again on GitHub by its marker.
MAX_WRITE_RESULT_BYTES: Final = 64_000
#: A write's key: the launch token (``<agent id>-g<n>-l<n>``) and the write's number.
KEY_PATTERN: Final = r"^[A-Za-z0-9._-]{1,160}\.w[0-9]{1,9}$"


@dataclass(frozen=True)
class WriteClaim:
    """What an earlier claim of a write's key left: when it was claimed, and GitHub's answer
    once it was recorded (None: the write may or may not have reached GitHub)."""

    claimed_at: datetime
    result: Any | None = None


def write_key(launch_token: str, number: int) -> str:
    """The key of the ``number``-th write of the task of ``launch_token``."""
    return f"{launch_token}.w{number}"


def belongs_to(key: str, launch_token: str) -> bool:
    """Whether ``key`` names a write of the task of ``launch_token`` (a task keys its own only)."""
    return key.startswith(f"{launch_token}.w") and key[len(launch_token) + 2 :].isdigit()
