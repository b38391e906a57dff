"""What the two gits of an agent task share: the error, the remote, a push's answer, the
environment every framework git runs in, and the names the framework moves.

The two gits themselves: :mod:`squadron.adapters.git.framework_clone` (the host's clone, the only
one that talks to GitHub) and :mod:`squadron.adapters.git.working_copy` (the agent's checkout);
the design is in :mod:`squadron.adapters.git`.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from squadron.errors import SquadronError

#: A git command must not hang a task: network operations get this long.
GIT_TIMEOUT_SECONDS = 300
#: A commit id (SHA-1 or SHA-256).
SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
#: Branch names the framework moves between the repositories (git's own rules are stricter).
BRANCH = re.compile(r"^(?!-)(?!.*\.\.)[A-Za-z0-9._/-]{1,200}(?<!\.lock)(?<![/.])$")


class GitError(SquadronError):
    """A git command failed; the message carries git's own words."""


@dataclass(frozen=True)
class GitRemote:
    #: ``https://github.com/owner/repo.git`` (or a local path in tests).
    url: str
    #: The installation token for HTTPS remotes (reading); read per command, so a refreshed token
    #: is used.
    token: Callable[[], str] | None = None
    #: The token a push uses (contents write); the reading token when None.
    push_token: Callable[[], str] | None = None


@dataclass(frozen=True)
class PushResult:
    pushed: bool
    sha: str
    detail: str
    #: Refused for carrying what looks like a secret (the agent's task is handed to humans).
    secret: bool = False


Runner = Callable[..., "subprocess.CompletedProcess[Any]"]


def git_env(home: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": home,
        "GIT_TERMINAL_PROMPT": "0",
        # No system or global config: the task's behaviour does not depend on the image.
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_ATTR_NOSYSTEM": "1",
        # What the environment names wins over any configuration: nothing to run.
        "GIT_PAGER": "cat",
        "GIT_EDITOR": "false",
        "GIT_SEQUENCE_EDITOR": "false",
        "GIT_SSH_COMMAND": "false",
        "GIT_ASKPASS": "false",
        "LC_ALL": "C",
    }
    config = dict(extra or {})
    env["GIT_CONFIG_COUNT"] = str(len(config))
    for index, (key, value) in enumerate(config.items()):
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    return env


def git_words(done: subprocess.CompletedProcess[Any]) -> str:
    out = done.stderr if isinstance(done.stderr, str) else (done.stderr or b"").decode("utf-8", "replace")
    std = done.stdout if isinstance(done.stdout, str) else ""
    return (out + "\n" + std).strip()[-2000:]


def check_branch(branch: str) -> str:
    if not BRANCH.fullmatch(branch):
        raise GitError(f"{branch!r} is not a branch name the framework moves")
    return branch
