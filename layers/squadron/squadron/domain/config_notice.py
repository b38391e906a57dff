"""Telling a repository, once, that its configuration is invalid — pure.

One issue per repository, titled :data:`NOTICE_TITLE`, labelled :data:`NOTICE_LABEL`
(which finds it with one request) and recognised by a hidden HTML comment
(:data:`MARKER_PREFIX`) carrying a digest of the problems it shows. The router
reconciles that issue with the configuration now on the default branch whenever the
configuration changes from valid to invalid, from one set of problems to another, or
back:

- invalid and no notice yet: open one;
- invalid, notice open with other problems: update it;
- invalid, notice closed: reopen and update it if the problems changed (or it was
  closed because the configuration became valid); if a human closed it and the
  problems are the same, leave it closed — the repository was told once;
- valid, notice open: say so and close it (its marker becomes ``resolved``).

An issue rather than a commit comment: it is seen by everyone watching the
repository, survives force-pushes, can be found again by label and marker, and is
closed when the problem goes away. Two routers racing to open it both open one; the
next reconciliation keeps the oldest open notice and closes the others as duplicates.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from squadron.domain.repo_config.errors import Problem

NOTICE_TITLE = "Squadron configuration is invalid"
NOTICE_LABEL = "squadron-config"
MARKER_PREFIX = "<!-- squadron:config-notice"
RESOLVED = "resolved"
#: Problems listed in the issue body (all of them are in the router's log).
MAX_PROBLEMS_SHOWN = 50
#: Characters of one problem shown (GitHub caps a body at 65,536).
MAX_PROBLEM_CHARS = 500

_MARKER_RE = re.compile(r"<!-- squadron:config-notice digest=([0-9a-f]{16}|resolved) -->")


def marker(digest: str) -> str:
    return f"{MARKER_PREFIX} digest={digest} -->"


def problems_digest(problems: Sequence[Problem]) -> str:
    text = "\n".join(str(problem) for problem in problems)
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:16]


@dataclass(frozen=True)
class NoticeIssue:
    """An issue of the repository as the notice sees it."""

    number: int
    state: Literal["open", "closed"]
    #: The marker's digest; None when the issue is not a notice.
    digest: str | None


def notice_issue(item: Mapping[str, Any]) -> NoticeIssue | None:
    """A notice among GitHub's list of issues (pull requests and others' issues are not)."""
    number = item.get("number")
    body = item.get("body")
    if "pull_request" in item or not isinstance(number, int) or not isinstance(body, str):
        return None
    found = _MARKER_RE.findall(body)
    if not found:
        return None
    # The last marker is ours (it ends the body); one quoted in a problem above it is not.
    return NoticeIssue(number, "closed" if item.get("state") == "closed" else "open", found[-1])


@dataclass(frozen=True)
class OpenNotice:
    title: str
    body: str
    labels: tuple[str, ...] = (NOTICE_LABEL,)


@dataclass(frozen=True)
class UpdateNotice:
    number: int
    body: str
    reopen: bool = False


@dataclass(frozen=True)
class CloseNotice:
    number: int
    #: Said on the issue before it is closed.
    comment: str
    #: The body it keeps (marker resolved), or None to leave it (a duplicate).
    body: str | None = None


NoticeAction = OpenNotice | UpdateNotice | CloseNotice


def _shown(problem: Problem) -> str:
    text = " ".join(str(problem).split())  # one line each: a problem cannot break out of the block
    return text if len(text) <= MAX_PROBLEM_CHARS else text[: MAX_PROBLEM_CHARS - 1] + "…"


def notice_body(problems: Sequence[Problem], *, branch: str, sha: str) -> str:
    count = len(problems)
    shown = [f"    {_shown(problem)}" for problem in problems[:MAX_PROBLEMS_SHOWN]]
    if count > MAX_PROBLEMS_SHOWN:
        shown.append(f"    ... and {count - MAX_PROBLEMS_SHOWN} more")
    return "\n".join(
        [
            f"Squadron cannot use the configuration in `.squadron/` on `{branch}` at {sha[:12]}: "
            f"{count} problem{'s' if count != 1 else ''}.",
            "",
            # An indented code block: nothing in a problem (a mention, a link) is rendered.
            *shown,
            "",
            "While it is invalid, Squadron is **paused** in this repository: no agent is started or "
            "woken and no pull request is judged or merged. Events are still recorded, agents "
            "already running finish their turn, and humans are still told what needs them.",
            "",
            f"Fix the files on `{branch}` (`squadron validate .squadron` shows the same problems). "
            "Squadron resumes by itself and closes this issue.",
            "",
            marker(problems_digest(problems)),
        ]
    )


def resolved_body(*, branch: str, sha: str) -> str:
    return (
        f"The configuration in `.squadron/` on `{branch}` is valid again at {sha[:12]}: Squadron "
        f"resumed in this repository.\n\n{marker(RESOLVED)}"
    )


def plan_notice(
    issues: Sequence[NoticeIssue], problems: Sequence[Problem] | None, *, branch: str, sha: str
) -> list[NoticeAction]:
    """What to do to the notice so that it says what ``problems`` say (None: the config is valid)."""
    ours = sorted((issue for issue in issues if issue.digest is not None), key=lambda issue: issue.number)
    opened = [issue for issue in ours if issue.state == "open"]
    actions: list[NoticeAction] = [
        CloseNotice(duplicate.number, f"Duplicate of #{opened[0].number}.") for duplicate in opened[1:]
    ]
    if problems is None:
        if opened:
            actions.append(
                CloseNotice(
                    opened[0].number,
                    f"The configuration is valid again at {sha[:12]}; Squadron resumed.",
                    resolved_body(branch=branch, sha=sha),
                )
            )
        return actions
    digest = problems_digest(problems)
    body = notice_body(problems, branch=branch, sha=sha)
    current = opened[0] if opened else (ours[-1] if ours else None)
    if current is None:
        actions.append(OpenNotice(NOTICE_TITLE, body))
    elif current.digest != digest:
        actions.append(UpdateNotice(current.number, body, reopen=current.state == "closed"))
    return actions
