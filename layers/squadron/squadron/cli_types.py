"""Argument types of the ``squadron`` commands: a bad value is a usage error naming it, never a traceback.

argparse turns the ``ValueError`` (or ``ArgumentTypeError``) of a ``type=`` function into
``squadron <command>: error: argument --port: ...`` and exit status 2.
"""

from __future__ import annotations

import argparse
import math
import re

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
