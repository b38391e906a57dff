"""Who may do what on GitHub — pure. Every GitHub call is checked here before it is sent.

The table maps a caller's role kind to the actions it may take at all; a few
actions then check their target: a dev may push to and open PRs from its own
branch only, a reviewer may post only its own ``squadron/<role>`` status, and
only the framework merges (or puts a merge in GitHub's merge queue), and only with the
approval flow's consent. A
refusal is a :class:`PermissionDeniedError` naming the role, the action and why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Final

from squadron.errors import SquadronError

if TYPE_CHECKING:
    from squadron.domain.agents import AgentRecord


class CallerKind(StrEnum):
    PM = "pm"
    DEV = "dev"
    REVIEW = "review"
    #: Squadron itself (router, reconciler, merge gate): not an LLM.
    FRAMEWORK = "framework"


def caller_kind(role_kind: str) -> CallerKind:
    """The caller kind of an agent role kind (``pm``, ``dev``, ``review``)."""
    return CallerKind(str(role_kind))


class Action(StrEnum):
    READ = "read"  # issues, PRs, files, branches, statuses, permissions
    CREATE_ISSUE = "create_issue"
    UPDATE_ISSUE = "update_issue"  # title, body
    CLOSE_ISSUE = "close_issue"
    REOPEN_ISSUE = "reopen_issue"
    LABEL = "label"
    ASSIGN = "assign"
    COMMENT = "comment"
    PUSH = "push"
    OPEN_PR = "open_pr"
    UPDATE_PR_BRANCH = "update_pr_branch"
    REVIEW = "review"  # comment-only review
    APPROVE = "approve"
    REQUEST_CHANGES = "request_changes"
    POST_STATUS = "post_status"
    CHECK_RUN = "check_run"
    MERGE = "merge"
    #: Put a pull request in its base's merge queue (GitHub's queue then merges it): a merge.
    ENQUEUE_MERGE = "enqueue_merge"
    #: Take a pull request the App queued out of the merge queue again.
    DEQUEUE_MERGE = "dequeue_merge"
    DELETE_BRANCH = "delete_branch"  # a merged PR's head branch
    PROTECT_BRANCH = "protect_branch"  # `squadron branch-protection apply`, by an admin
    APP_ADMIN = "app_admin"  # webhook deliveries, installation tokens
    #: Squadron's own bookkeeping (no GitHub call): issue A waits for issue B.
    REGISTER_BLOCKER = "register_blocker"
    #: Squadron's own bookkeeping: a change set proposed on an issue (docs/change-sets.md); the
    #: writers of its repositories approve it, and it gives its proposer no right anywhere.
    PROPOSE_CHANGE_SET = "propose_change_set"


ALLOWED: Final[dict[CallerKind, frozenset[Action]]] = {
    CallerKind.PM: frozenset(
        {
            Action.READ,
            Action.CREATE_ISSUE,
            Action.UPDATE_ISSUE,
            Action.CLOSE_ISSUE,
            Action.REOPEN_ISSUE,
            Action.LABEL,
            Action.ASSIGN,
            Action.COMMENT,
            Action.REGISTER_BLOCKER,
            Action.PROPOSE_CHANGE_SET,
        }
    ),
    CallerKind.DEV: frozenset(
        {
            Action.READ,
            Action.CREATE_ISSUE,  # blocker issues
            Action.REGISTER_BLOCKER,  # of its own issue (report_blocked, create_blocker_issue)
            Action.COMMENT,
            Action.PUSH,
            Action.OPEN_PR,
            Action.UPDATE_PR_BRANCH,
        }
    ),
    CallerKind.REVIEW: frozenset(
        {
            Action.READ,
            Action.COMMENT,
            Action.REVIEW,
            Action.APPROVE,
            Action.REQUEST_CHANGES,
            Action.POST_STATUS,
        }
    ),
    CallerKind.FRAMEWORK: frozenset(Action),
}

#: The GitHub App permissions the agent gateway narrows a role's writes to, per role kind:
#: enough for the role's actions above and nothing more (metadata is always granted). An agent
#: task itself holds only :data:`TASK_READ_PERMISSIONS` (and a dev task, for the framework's
#: push of its branch, :data:`PUSH_PERMISSIONS`).
INSTALLATION_PERMISSIONS: Final[dict[CallerKind, dict[str, str]]] = {
    CallerKind.PM: {"issues": "write", "pull_requests": "read", "contents": "read", "metadata": "read"},
    CallerKind.DEV: {"contents": "write", "pull_requests": "write", "issues": "write", "metadata": "read"},
    CallerKind.REVIEW: {
        "contents": "read",
        "pull_requests": "write",
        "statuses": "write",
        "issues": "read",
        "metadata": "read",
    },
}

#: What an agent task's own token may do: read its repository (issues, pull requests, code).
TASK_READ_PERMISSIONS: Final[dict[str, str]] = {
    "contents": "read",
    "issues": "read",
    "pull_requests": "read",
    "metadata": "read",
}
#: What the framework's push of a dev agent's branch needs (from its own clone, never the agent's).
PUSH_PERMISSIONS: Final[dict[str, str]] = {"contents": "write", "metadata": "read"}

#: The action a review event needs.
REVIEW_EVENT_ACTIONS: Final[dict[str, Action]] = {
    "APPROVE": Action.APPROVE,
    "REQUEST_CHANGES": Action.REQUEST_CHANGES,
    "COMMENT": Action.REVIEW,
}

_LEADING_TAG_RE = re.compile(r"^\s*\[squadron:[a-z0-9][a-z0-9-]*\]\s*")


class PermissionDeniedError(SquadronError):
    def __init__(self, caller: Caller, action: Action, reason: str) -> None:
        self.caller = caller
        self.action = action
        self.reason = reason
        super().__init__(f"{caller.name} ({caller.kind} role) may not {action}: {reason}")


@dataclass(frozen=True)
class Caller:
    """Who is calling GitHub: an agent (role, display name, own branch) or the framework."""

    kind: CallerKind
    #: Short name used in role tags: ``dev-38``, ``pm``, ``pr-review-101``, ``framework``.
    name: str
    role: str = ""
    branch: str | None = None

    @property
    def tag(self) -> str:
        return f"[squadron:{self.name}]"

    @classmethod
    def framework(cls) -> Caller:
        return cls(CallerKind.FRAMEWORK, "framework", "framework")


@dataclass(frozen=True)
class MergeConsent:
    """The approval flow's verdict on a pull request, required to merge it."""

    pr_number: int
    allowed: bool
    reason: str


def check(
    caller: Caller,
    action: Action,
    *,
    branch: str | None = None,
    status_context: str | None = None,
    pr_number: int | None = None,
    consent: MergeConsent | None = None,
) -> None:
    """Raise PermissionDeniedError unless ``caller`` may take ``action`` (on that target)."""
    if action not in ALLOWED[caller.kind]:
        raise PermissionDeniedError(caller, action, f"the {caller.kind} role never does")
    if action in (Action.PUSH, Action.OPEN_PR, Action.UPDATE_PR_BRANCH) and caller.kind is CallerKind.DEV:
        if caller.branch is None:
            raise PermissionDeniedError(caller, action, "it has no branch of its own")
        if branch != caller.branch:
            raise PermissionDeniedError(caller, action, f"branch {branch} is not its own ({caller.branch})")
    if action is Action.POST_STATUS and caller.kind is CallerKind.REVIEW:
        own = f"squadron/{caller.role}"
        if status_context != own:
            raise PermissionDeniedError(caller, action, f"status {status_context} is not its own ({own})")
    if action in (Action.MERGE, Action.ENQUEUE_MERGE):
        if consent is None or consent.pr_number != pr_number:
            raise PermissionDeniedError(caller, action, f"no approval-flow decision for PR #{pr_number}")
        if not consent.allowed:
            raise PermissionDeniedError(caller, action, f"the approval flow says no: {consent.reason}")


def agent_caller(agent: AgentRecord) -> Caller:
    """The caller an agent acts as on GitHub: its role kind, display name, role and own branch."""
    return Caller(caller_kind(agent.kind), agent.display_name, agent.role, agent.branch)


def tagged(caller: Caller, body: str) -> str:
    """``body`` starting with the caller's role tag, exactly once (a foreign leading tag is replaced)."""
    if body.startswith(caller.tag):
        return body
    return f"{caller.tag} {_LEADING_TAG_RE.sub('', body, count=1)}"


def untagged(body: str) -> str:
    """``body`` without the role tag :func:`tagged` put before it (what its writer wrote)."""
    return _LEADING_TAG_RE.sub("", body, count=1)
