"""Argument types of the ``squadron`` commands: a bad value is a usage error naming it, never a traceback.

argparse turns the ``ValueError`` (or ``ArgumentTypeError``) of a ``type=`` function into
``squadron <command>: error: argument --port: ...`` and exit status 2.
"""

from __future__ import annotations

import argparse
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

#: GitHub's logins are at most 39 characters; repository names at most 100.
_REPO_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}")
#: GitHub's ids are 64-bit.
MAX_ID = 2**63 - 1
#: The longest retention a command takes (ten years).
MAX_DAYS = 3653


def repo_name(text: str) -> str:
    """``owner/name`` of a GitHub repository."""
    if not _REPO_RE.fullmatch(text) or text.split("/", 1)[1] in (".", ".."):
        raise argparse.ArgumentTypeError(f"{text[:120]!r} is not owner/name of a GitHub repository")
    return text


def github_id(text: str) -> int:
    """A GitHub id (at most 19 digits), or 0 for none yet (an App before it exists)."""
    if not text.isascii() or not text.isdigit() or len(text) > 19 or int(text) > MAX_ID:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a GitHub id (a whole number)")
    return int(text)


def port(text: str) -> int:
    """A TCP port, 0 (any free one) to 65535."""
    if not text.isascii() or not text.isdigit() or len(text) > 5 or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a port (0 to 65535)")
    return int(text)


def positive_number(text: str) -> float:
    """A finite number greater than 0 (seconds, minutes)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text[:40]!r}: expected a number greater than 0")
    return value


def days(text: str) -> int:
    """A whole number of days, 0 to ten years (a retention)."""
    if not text.isascii() or not text.isdigit() or len(text) > 4 or int(text) > MAX_DAYS:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number of days (0 to {MAX_DAYS})")
    return int(text)


# --- exit statuses ------------------------------------------------------------------------------

#: Every ``squadron`` command ends with one of these (``--help`` lists them).
EXIT_OK = 0
#: The command ran and found problems (an invalid configuration, a refused value, a missing file).
EXIT_PROBLEMS = 1
#: The command line itself is wrong (argparse's own status: an unknown flag, a bad value).
EXIT_USAGE = 2
#: The stack (deployed or local) or GitHub could not be reached or read.
EXIT_UNAVAILABLE = 3
#: Waited for something that did not come in time (``app create``'s redirect).
EXIT_TIMED_OUT = 4
#: Stopped with Ctrl-C.
EXIT_INTERRUPTED = 130

EXIT_STATUSES_HELP = (
    "exit status:\n"
    f"  {EXIT_OK}    done\n"
    f"  {EXIT_PROBLEMS}    problems found (each printed), or a value refused\n"
    f"  {EXIT_USAGE}    usage error: the command line is wrong (nothing was done)\n"
    f"  {EXIT_UNAVAILABLE}    the stack (deployed or local) or GitHub could not be reached\n"
    f"  {EXIT_TIMED_OUT}    waited in vain (app create: GitHub's redirect)\n"
    f"  {EXIT_INTERRUPTED}  stopped with Ctrl-C"
)


# --- --since ------------------------------------------------------------------------------------

_DURATION_RE = re.compile(r"(\d{1,6})([smhdw])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
#: The farthest back a ``--since`` looks (ten years).
MAX_SINCE = timedelta(days=MAX_DAYS)
SINCE_FORMS = "a duration back from now (45s, 30m, 2h, 1d, 1w) or an ISO 8601 time (2026-11-27T15:00Z)"


@dataclass(frozen=True)
class Since:
    """Where a ``--since`` starts: ``ago`` back from now, or at the time ``at`` (aware, UTC if unsaid)."""

    ago: timedelta | None = None
    at: datetime | None = None

    def start(self, now: datetime) -> datetime:
        """The moment it names, seen from ``now``."""
        if self.at is not None:
            return self.at
        assert self.ago is not None
        return now - self.ago


def since(text: str) -> Since:
    """The one ``--since`` of every command: a duration back from now or an ISO 8601 time."""
    shown = text[:60]
    stripped = text.strip()
    duration = _DURATION_RE.fullmatch(stripped)
    if duration is not None:
        ago = timedelta(seconds=int(duration.group(1)) * _UNIT_SECONDS[duration.group(2)])
        if ago > MAX_SINCE:
            raise argparse.ArgumentTypeError(f"{shown!r} is more than {MAX_DAYS} days back")
        return Since(ago=ago)
    if stripped.isascii() and stripped[:1].isdigit() and len(stripped) >= 10:
        try:
            at = datetime.fromisoformat(stripped)
        except ValueError:
            pass
        else:
            return Since(at=at if at.tzinfo is not None else at.replace(tzinfo=UTC))
    hint = f" (say {stripped}m for minutes)" if stripped.isascii() and stripped.isdigit() else ""
    raise argparse.ArgumentTypeError(f"{shown!r} is not {SINCE_FORMS}{hint}")
