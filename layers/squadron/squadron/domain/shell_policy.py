"""What an agent's shell may not do — pure. Checked by the host before every shell tool call.

The shell holds no credentials, so these commands would fail anyway; refusing
them up front tells the model the right way (the framework tools) instead of
letting it fight an authentication error, and keeps a misconfigured host from
ever turning the shell into a way around the role table.
"""

from __future__ import annotations

import re
from typing import Final

_COMMAND_START = r"(?:^|[;&|(`]|\$\()\s*(?:\w+=\S*\s+)*(?:sudo\s+|env\s+(?:\w+=\S*\s+)*)?"

RULES: Final[tuple[tuple[re.Pattern[str], str], ...]] = (
    (
        re.compile(_COMMAND_START + r"git\s+(?:-\S+\s+(?:\S+\s+)?)*push\b"),
        "git push from the shell is not allowed: call git_push (it pushes your own branch).",
    ),
    (
        re.compile(_COMMAND_START + r"gh\s+pr\s+merge\b"),
        "merging is not allowed to agents: Squadron merges when the approval flow is met.",
    ),
    (
        re.compile(_COMMAND_START + r"gh\s+(?:api|pr|issue|release|repo|secret|workflow|auth)\b"),
        "the gh CLI is not allowed: use the framework tools (comment, open_pr, read_issue...).",
    ),
    (
        re.compile(r"\b(?:curl|wget|http|httpie)\b[^\n]*\bapi\.github\.com\b"),
        "calling the GitHub API from the shell is not allowed: use the framework tools.",
    ),
    (
        re.compile(
            _COMMAND_START
            + r"git\s+(?:-\S+\s+(?:\S+\s+)?)*(?:remote\s+(?:add|set-url)|config\s+[^\n]*credential)"
        ),
        "changing git remotes or credentials is not allowed.",
    ),
)


def refuse_shell(command: str | None) -> str | None:
    """Why ``command`` may not run in an agent's shell, or None when it may."""
    if not command:
        return None
    for pattern, reason in RULES:
        if pattern.search(command):
            return f"denied: {reason}"
    return None
