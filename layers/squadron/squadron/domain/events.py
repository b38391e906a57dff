"""The normalized event envelope: what the ingress puts on events.fifo and the router reads.

A GitHub webhook payload is large (tens of kilobytes) and mostly irrelevant to
routing. The ingress trims it to an :class:`EventEnvelope`: versioned, typed,
bounded in size, and carrying exactly the fields routing needs. Free text
(issue, comment, pull request and review bodies) is cut to
:data:`MAX_BODY_BYTES` UTF-8 bytes so a message never nears the SQS limit.

Everything here is pure: no I/O, no clocks (the caller passes ``received_at``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

# Re-exported (the `as` form tells mypy so): they lived here before the ingress needed them light.
from squadron.domain.breakers import Limit
from squadron.domain.merge_queue import group_of
from squadron.domain.routed import ROUTED_EVENTS as ROUTED_EVENTS  # noqa: PLC0414
from squadron.domain.routed import performed_by_app as performed_by_app  # noqa: PLC0414
from squadron.domain.routed import routing_interest as routing_interest  # noqa: PLC0414
from squadron.domain.usage import MAX_MODELS, ModelTokens
from squadron.errors import SquadronError

ENVELOPE_SCHEMA_VERSION: Literal[1] = 1

#: Upper bound for any one free-text field in an envelope, in UTF-8 bytes.
MAX_BODY_BYTES = 16 * 1024
#: Upper bound for titles, in UTF-8 bytes (GitHub allows 256 characters).
MAX_TITLE_BYTES = 1024
#: Upper bound for list fields (labels, assignees, branches, pull request numbers).
MAX_LIST_ITEMS = 100
#: A serialized envelope never exceeds this many bytes (SQS accepts 256 KiB).
MAX_ENVELOPE_BYTES = 200 * 1024

#: GitHub's ids (users, repositories, installations, comments, reviews, checks) are 64-bit.
MAX_GITHUB_ID = 2**63 - 1
#: Issue and pull request numbers are 32-bit.
MAX_ISSUE_NUMBER = 2**31 - 1

#: An id GitHub gave: a positive 64-bit integer, never a boolean, float or string.
GitHubId = Annotated[int, Field(strict=True, gt=0, le=MAX_GITHUB_ID)]
#: An issue or pull request number: a positive 32-bit integer.
IssueNumber = Annotated[int, Field(strict=True, gt=0, le=MAX_ISSUE_NUMBER)]
#: A person's id: a GitHub account's (from 1), or 0 for the framework's own actors.
ActorId = Annotated[int, Field(strict=True, ge=0, le=MAX_GITHUB_ID)]
Login = Annotated[str, Field(min_length=1, max_length=64)]
Word = Annotated[str, Field(max_length=64)]
Ref = Annotated[str, Field(max_length=1024)]
Sha = Annotated[str, Field(max_length=64)]
Url = Annotated[str, Field(max_length=2048)]
Label = Annotated[str, Field(max_length=256)]
#: SQS takes a deduplication id of 1 to 128 characters, each ASCII letter, digit or punctuation.
DELIVERY_ID_PATTERN = r"^[!-~]{1,128}$"


class EnvelopeError(SquadronError):
    """A payload of a routed event cannot be trimmed into an envelope."""

    def __init__(self, event: str, detail: str) -> None:
        self.event = event
        self.detail = detail
        super().__init__(f"{event} payload is not usable: {detail}")


def truncate_utf8(text: str | None, limit: int) -> tuple[str, bool]:
    """Cut ``text`` to at most ``limit`` UTF-8 bytes on a character boundary.

    Returns the text and whether anything was cut.
    """
    if not text:
        return "", False
    encoded = text.encode("utf-8")
    if len(encoded) <= limit:
        return text, False
    return encoded[:limit].decode("utf-8", errors="ignore"), True


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Actor(_Model):
    """Who did something: a user, a bot or an organization."""

    login: Login
    id: ActorId
    type: Word = "User"

    @property
    def is_bot(self) -> bool:
        return self.type == "Bot" or self.login.endswith("[bot]")


class RepositoryRef(_Model):
    id: GitHubId
    full_name: str = Field(min_length=3, max_length=256)
    default_branch: Ref | None = None
    private: bool = False


class IssueFields(_Model):
    number: IssueNumber
    title: str
    body: str = ""
    body_truncated: bool = False
    state: Word
    state_reason: Word | None = None
    labels: tuple[Label, ...] = Field(default=(), max_length=MAX_LIST_ITEMS)
    assignees: tuple[Login, ...] = Field(default=(), max_length=MAX_LIST_ITEMS)
    author: Login | None = None
    author_association: Word | None = None
    is_pull_request: bool = False
    html_url: Url | None = None


class CommentFields(_Model):
    """An issue comment or a pull request review comment (``kind`` says which)."""

    id: GitHubId
    kind: Literal["issue_comment", "review_comment"]
    body: str = ""
    body_truncated: bool = False
    author: Actor
    author_association: Word | None = None
    html_url: Url | None = None
    path: str | None = Field(default=None, max_length=4096)
    in_reply_to_id: GitHubId | None = None


class PullRequestFields(_Model):
    number: IssueNumber
    title: str
    body: str = ""
    body_truncated: bool = False
    state: Word
    draft: bool = False
    merged: bool = False
    merge_commit_sha: Sha | None = None
    head_ref: Ref
    head_sha: Sha
    head_repo_full_name: str | None = Field(default=None, max_length=256)
    base_ref: Ref
    author: Login | None = None
    author_association: Word | None = None
    labels: tuple[Label, ...] = Field(default=(), max_length=MAX_LIST_ITEMS)
    html_url: Url | None = None


class ReviewFields(_Model):
    id: GitHubId
    state: Word
    body: str = ""
    body_truncated: bool = False
    author: Actor
    author_association: Word | None = None
    commit_id: Sha | None = None
    submitted_at: datetime | None = None


class MilestoneFields(_Model):
    """A milestone (its ``closed`` webhook starts the repository's retrospective of it)."""

    number: IssueNumber
    title: str = ""
    created_at: datetime | None = None
    closed_at: datetime | None = None
    html_url: Url | None = None


class CheckFields(_Model):
    """A check run or a check suite (``kind`` says which)."""

    id: GitHubId
    kind: Literal["check_run", "check_suite"]
    name: str | None = Field(default=None, max_length=1024)
    status: Word | None = None
    conclusion: Word | None = None
    head_sha: Sha
    head_branch: Ref | None = None
    app_slug: Login | None = None
    pull_request_numbers: tuple[IssueNumber, ...] = Field(default=(), max_length=MAX_LIST_ITEMS)


class MergeGroupFields(_Model):
    """A merge group of GitHub's merge queue (``merge_group`` webhooks)."""

    head_sha: Sha
    #: ``refs/heads/gh-readonly-queue/<base>/pr-<number>-<head sha>``.
    head_ref: Ref
    base_ref: Ref
    base_sha: Sha | None = None
    #: ``destroyed``: merged, invalidated or dequeued.
    reason: Word | None = None
    #: The pull request whose entry the group was built for (from ``head_ref``).
    pr_number: IssueNumber | None = None
    #: That pull request's head when it was queued (from ``head_ref``).
    pr_head_sha: Sha | None = None


class StatusFields(_Model):
    """A commit status (the ``status`` event)."""

    sha: Sha
    state: Word
    context: str = Field(max_length=1024)
    description: str | None = None
    target_url: Url | None = None
    branches: tuple[Ref, ...] = Field(default=(), max_length=MAX_LIST_ITEMS)


class RegisterBlocker(_Model):
    """Framework command: ``issue_number`` is blocked by ``blocker_number``.

    Sent by the PM's register_blocker tool and by a dev agent's report_blocked
    tool (``sleep`` true: the agent sleeps until every blocker is closed).
    """

    type: Literal["register_blocker"] = "register_blocker"
    issue_number: IssueNumber
    blocker_number: IssueNumber
    #: The agent that sent the command and the launch token of the task that sent it: a
    #: command from a task that was since replaced (relaunched, or a restarted generation)
    #: must not act on its successor.
    agent_id: str | None = None
    launch_token: str | None = Field(default=None, min_length=1, max_length=64)
    sleep: bool = False
    note: str = ""

    @model_validator(mode="after")
    def _sender_is_whole(self) -> RegisterBlocker:
        if (self.agent_id is None) != (self.launch_token is None):
            raise ValueError("agent_id and launch_token come together (the sending task)")
        if self.sleep and self.agent_id is None:
            raise ValueError("sleep needs the sending task (agent_id and launch_token)")
        return self


class RecoverAgent(_Model):
    """Framework command from the reconciler: an agent needs rescuing.

    ``relaunch``: its task is dead (no heartbeat, or ECS has no such task) — the
    router relaunches it with resume, once, then escalates. ``escalate``: it slept
    past its max_sleep_duration. ``launch``: its pending launch was held (RunTask
    refused it) and its back-off is over — the router tries the launch again. ``seen_version`` is the record version the
    reconciler judged: if the agent changed since (a heartbeat, a wake), the
    command is stale and changes nothing.
    """

    type: Literal["recover_agent"] = "recover_agent"
    agent_id: str = Field(min_length=1)
    #: The agent's issue (its message group); None for a repository's PM.
    issue_number: IssueNumber | None = None
    seen_version: int = Field(ge=1)
    action: Literal["relaunch", "escalate", "launch"]
    reason: str = Field(min_length=1, max_length=2_000)


class ReportConflict(_Model):
    """Framework command from the merge gate: an agent's PR conflicts with its base (AD-005).

    The first report for a head commit wakes the dev agent to resolve it; a report for
    the same head after the agent's attempt ended files a needs-human issue and puts the
    agent to sleep on it.
    """

    type: Literal["report_conflict"] = "report_conflict"
    issue_number: IssueNumber
    pr_number: IssueNumber
    head_sha: str = Field(min_length=1, max_length=64)
    base: str = Field(min_length=1, max_length=255)


class TaskUsage(_Model):
    """What one agent task used (added to the agent's life-long counters)."""

    tool_calls: int = Field(default=0, ge=0, le=1_000_000)
    turns: int = Field(default=0, ge=0, le=1_000_000)
    iterations: int = Field(default=0, ge=0, le=1_000_000)
    active_seconds: int = Field(default=0, ge=0, le=7 * 24 * 3600)
    #: The circuit breakers that warned the model (at their warning ratio), and the one that
    #: tripped, if any: each becomes a domain event when the router records the task's end.
    warned: tuple[Limit, ...] = Field(default=(), max_length=len(Limit))
    tripped: Limit | None = None
    #: The tokens each model read and wrote (what the task cost, priced by the router's table).
    tokens: tuple[ModelTokens, ...] = Field(default=(), max_length=MAX_MODELS)


class TaskEnded(_Model):
    """Agent command: how an agent's task ended (sent by its host through the agent gateway).

    The router, the registry's single writer, does what the ending implies: it adds the
    task's usage to the agent's counters, lets an idle agent wait for its next event (or
    wakes it at once if news came meanwhile), hands an escalated agent to humans, and ends
    the launch's secret. ``agent_id`` and ``launch_token`` are stamped by the gateway from
    the verified caller, never taken from the task.
    """

    type: Literal["task_ended"] = "task_ended"
    agent_id: str = Field(min_length=1, max_length=200)
    launch_token: str = Field(min_length=1, max_length=64)
    #: The agent's issue (its message group); None for a repository's PM.
    issue_number: IssueNumber | None = None
    #: idle: the turn ended (report_complete or nothing left), the agent waits for its next event;
    #: sleeping: it reported a blocker (its register_blocker command came first); escalated: a
    #: breaker tripped or it asked for humans; failed: the host crashed (the reconciler relaunches).
    outcome: Literal["idle", "sleeping", "escalated", "failed"]
    reason: str = Field(default="", max_length=4_000)
    #: The model's last words (for an escalation: its summary for the humans).
    summary: str = Field(default="", max_length=8_000)
    #: What happened to the work in progress (committed and pushed, or why not).
    saved: str = Field(default="", max_length=2_000)
    usage: TaskUsage = Field(default_factory=TaskUsage)
    #: The session ran to its end (a relaunch after a death in a row is counted from here).
    finished: bool = True


class _AgentAction(_Model):
    """What an agent just did on GitHub, as GitHub answered it (a framework command).

    The App's own webhooks are dropped at the ingress, so the router hears of what the
    App's agents do from the agent gateway, which carried the write out with the App's
    credentials and reports it from GitHub's answer — never from the task's words. The
    router handles each like the webhook GitHub would have sent, with the App as sender.
    """

    #: The event GitHub would have sent (the router's handlers are shared with it).
    webhook: ClassVar[tuple[str, str | None]]


class AgentOpenedIssue(_AgentAction):
    """A dev agent filed an issue (its blocker): the PM triages it like any other."""

    type: Literal["agent_opened_issue"] = "agent_opened_issue"
    webhook: ClassVar[tuple[str, str | None]] = ("issues", "opened")
    issue: IssueFields

    @property
    def issue_number(self) -> int:
        return self.issue.number


class AgentAssignedIssue(_AgentAction):
    """The PM assigned an issue to the App: its dev agent starts."""

    type: Literal["agent_assigned_issue"] = "agent_assigned_issue"
    webhook: ClassVar[tuple[str, str | None]] = ("issues", "assigned")
    issue: IssueFields

    @property
    def issue_number(self) -> int:
        return self.issue.number


class AgentOpenedPullRequest(_AgentAction):
    """A dev agent opened its pull request: it is linked and its reviewers start."""

    type: Literal["agent_opened_pull_request"] = "agent_opened_pull_request"
    webhook: ClassVar[tuple[str, str | None]] = ("pull_request", "opened")
    pull_request: PullRequestFields

    @property
    def issue_number(self) -> int:
        return self.pull_request.number


class AgentPushedCommits(_AgentAction):
    """A dev agent pushed to its open pull request's branch: its reviewers run again."""

    type: Literal["agent_pushed_commits"] = "agent_pushed_commits"
    webhook: ClassVar[tuple[str, str | None]] = ("pull_request", "synchronize")
    pull_request: PullRequestFields

    @property
    def issue_number(self) -> int:
        return self.pull_request.number


class AgentSubmittedReview(_AgentAction):
    """A review agent submitted its review: the dev agent hears of changes, the gate judges."""

    type: Literal["agent_submitted_review"] = "agent_submitted_review"
    webhook: ClassVar[tuple[str, str | None]] = ("pull_request_review", "submitted")
    review: ReviewFields
    pull_request: PullRequestFields

    @property
    def issue_number(self) -> int:
        return self.pull_request.number


class AgentPostedStatus(_AgentAction):
    """A review agent posted its squadron/<role> status: the merge gate judges the PR again."""

    type: Literal["agent_posted_status"] = "agent_posted_status"
    webhook: ClassVar[tuple[str, str | None]] = ("status", None)
    status: StatusFields
    #: The pull request it is on (its message group, as the status's webhook has none).
    pr_number: IssueNumber

    @property
    def issue_number(self) -> int:
        return self.pr_number


AgentAction = (
    AgentOpenedIssue
    | AgentAssignedIssue
    | AgentOpenedPullRequest
    | AgentPushedCommits
    | AgentSubmittedReview
    | AgentPostedStatus
)
AGENT_ACTIONS = (
    AgentOpenedIssue,
    AgentAssignedIssue,
    AgentOpenedPullRequest,
    AgentPushedCommits,
    AgentSubmittedReview,
    AgentPostedStatus,
)


def issue_fields(issue: Mapping[str, Any]) -> IssueFields:
    """An issue as GitHub answers it, trimmed as a webhook's would be."""
    return IssueFields.model_validate(_trim_issue(issue))


def pull_request_fields(pr: Mapping[str, Any]) -> PullRequestFields:
    return PullRequestFields.model_validate(_trim_pull_request(pr))


def review_fields(review: Mapping[str, Any]) -> ReviewFields:
    return ReviewFields.model_validate(_trim_review(review))


def status_fields(status: Mapping[str, Any]) -> StatusFields:
    return StatusFields.model_validate(_trim_status(status))


class FinishDecision(_Model):
    """Framework command from the reconciler: carry out what a committed decision left undone.

    A decision's outside effects are carried out right after its commit; when that failed and
    its delivery was not retried (it went to the dead-letter queue), the reconciler sends this.
    The router looks the decision up by ``decision`` and carries out its outbox, each effect
    under its key (what was done already is not done again). It never decides anything.
    """

    type: Literal["finish_decision"] = "finish_decision"
    decision: str = Field(min_length=1, max_length=200)
    #: In the repository's message group (a decision spans the issues of its delivery).
    issue_number: None = None


class StartRetrospective(_Model):
    """Framework command: hold the repository's retrospective of a period.

    Sent by the repository's EventBridge Scheduler schedule (weekly by default, the
    repository's ``retrospective.schedule``: the schedule's input is this envelope, its
    delivery id and times filled in by the Scheduler with the firing's time), by an operator
    (``squadron retro start``), or made by the router of a milestone's ``closed`` webhook. The
    router decides; the figures are computed by code from the repository's history.
    """

    type: Literal["start_retrospective"] = "start_retrospective"
    trigger: Literal["schedule", "milestone", "operator"] = "schedule"
    #: The period's end (None: the envelope's ``occurred_at``, the schedule's firing time).
    window_end: datetime | None = None
    #: Its start (None: the previous retrospective's end, else ``window_days`` before the end).
    window_start: datetime | None = None
    window_days: int = Field(default=7, ge=1, le=366)
    milestone_number: int | None = Field(default=None, ge=1)
    milestone_title: str | None = Field(default=None, max_length=256)
    #: In the repository's message group.
    issue_number: None = None


SquadronCommand = Annotated[
    StartRetrospective
    | RegisterBlocker
    | RecoverAgent
    | ReportConflict
    | TaskEnded
    | FinishDecision
    | AgentOpenedIssue
    | AgentAssignedIssue
    | AgentOpenedPullRequest
    | AgentPushedCommits
    | AgentSubmittedReview
    | AgentPostedStatus,
    Field(discriminator="type"),
]

#: The event name of framework commands. Never in :data:`ROUTED_EVENTS`, so a
#: webhook can never claim to be one.
SQUADRON_EVENT = "squadron"


class EventEnvelope(_Model):
    """A trimmed, versioned GitHub event, as carried on events.fifo.

    ``origin`` is ``github`` for webhooks; the framework puts ``squadron``
    envelopes on the same queue for the effects of its own actions, because
    the App's own webhooks are dropped at the ingress; ``reconciler`` marks a
    webhook rebuilt from GitHub's current state because the original was missed;
    ``agent`` marks what an agent's task sent through the agent gateway, which
    stamps ``source_agent`` from the verified caller. Only the ingress, the
    router, the reconciler and the gateway may put envelopes on the queue.
    """

    schema_version: Literal[1] = ENVELOPE_SCHEMA_VERSION
    origin: Literal["github", "squadron", "reconciler", "agent"] = "github"
    #: The agent whose task sent this (origin ``agent`` only), as the gateway verified it.
    source_agent: str | None = Field(default=None, max_length=200)
    delivery_id: str = Field(pattern=DELIVERY_ID_PATTERN)
    event: str = Field(min_length=1, max_length=64)
    action: Word | None = None
    received_at: datetime
    #: When the change happened on GitHub (from the payload's own timestamps); unlike
    #: ``received_at`` it stays the same when GitHub redelivers the event.
    occurred_at: datetime | None = None
    installation_id: GitHubId | None = None
    repository: RepositoryRef
    sender: Actor
    issue: IssueFields | None = None
    comment: CommentFields | None = None
    pull_request: PullRequestFields | None = None
    review: ReviewFields | None = None
    check: CheckFields | None = None
    status: StatusFields | None = None
    merge_group: MergeGroupFields | None = None
    label: Label | None = None
    assignee: Actor | None = None
    milestone: MilestoneFields | None = None
    command: SquadronCommand | None = None

    @property
    def subject_number(self) -> int | None:
        """The issue or pull request number the event is about, if any."""
        if self.issue is not None:
            return self.issue.number
        if self.command is not None:
            return self.command.issue_number
        if self.pull_request is not None:
            return self.pull_request.number
        if self.check is not None and self.check.pull_request_numbers:
            return min(self.check.pull_request_numbers)
        if self.merge_group is not None:
            return self.merge_group.pr_number
        return None

    @property
    def message_group_id(self) -> str:
        """FIFO message group: one per issue or pull request, else one per repository."""
        number = self.subject_number
        suffix = str(number) if number is not None else "repo"
        return f"{self.repository.id}#{suffix}"

    def to_message(self) -> str:
        """Serialize for the queue; guaranteed below :data:`MAX_ENVELOPE_BYTES`."""
        text = self.model_dump_json(exclude_none=True, exclude_defaults=False)
        size = len(text.encode("utf-8"))
        if size > MAX_ENVELOPE_BYTES:
            raise EnvelopeError(self.event, f"serialized envelope is {size} bytes, over {MAX_ENVELOPE_BYTES}")
        return text

    @classmethod
    def from_message(cls, text: str | bytes) -> EventEnvelope:
        return cls.model_validate_json(text)


# --- trimming -------------------------------------------------------------------------------


def _obj(payload: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    value = payload.get(key)
    return value if isinstance(value, Mapping) else None


def _login(user: Mapping[str, Any] | None) -> str | None:
    if user is None:
        return None
    login = user.get("login")
    return login if isinstance(login, str) else None


def _actor(user: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if user is None:
        return None
    return {"login": user.get("login"), "id": user.get("id"), "type": user.get("type") or "User"}


def _names(items: Any, key: str) -> list[str]:
    if not isinstance(items, list):
        return []
    names = [item.get(key) for item in items if isinstance(item, Mapping)]
    return [name for name in names if isinstance(name, str)][:MAX_LIST_ITEMS]


def _text(value: Any, limit: int = MAX_BODY_BYTES) -> tuple[str, bool]:
    return truncate_utf8(value if isinstance(value, str) else None, limit)


def _trim_issue(issue: Mapping[str, Any]) -> dict[str, Any]:
    body, cut = _text(issue.get("body"))
    title, _ = _text(issue.get("title"), MAX_TITLE_BYTES)
    return {
        "number": issue.get("number"),
        "title": title,
        "body": body,
        "body_truncated": cut,
        "state": issue.get("state"),
        "state_reason": issue.get("state_reason"),
        "labels": _names(issue.get("labels"), "name"),
        "assignees": _names(issue.get("assignees"), "login"),
        "author": _login(_obj(issue, "user")),
        "author_association": issue.get("author_association"),
        "is_pull_request": isinstance(issue.get("pull_request"), Mapping),
        "html_url": issue.get("html_url"),
    }


def _trim_comment(comment: Mapping[str, Any], kind: str) -> dict[str, Any]:
    body, cut = _text(comment.get("body"))
    return {
        "id": comment.get("id"),
        "kind": kind,
        "body": body,
        "body_truncated": cut,
        "author": _actor(_obj(comment, "user")),
        "author_association": comment.get("author_association"),
        "html_url": comment.get("html_url"),
        "path": comment.get("path"),
        "in_reply_to_id": comment.get("in_reply_to_id"),
    }


def _trim_pull_request(pr: Mapping[str, Any]) -> dict[str, Any]:
    body, cut = _text(pr.get("body"))
    title, _ = _text(pr.get("title"), MAX_TITLE_BYTES)
    head = _obj(pr, "head") or {}
    base = _obj(pr, "base") or {}
    head_repo = _obj(head, "repo")
    return {
        "number": pr.get("number"),
        "title": title,
        "body": body,
        "body_truncated": cut,
        "state": pr.get("state"),
        "draft": bool(pr.get("draft")),
        "merged": bool(pr.get("merged")),
        "merge_commit_sha": pr.get("merge_commit_sha"),
        "head_ref": head.get("ref"),
        "head_sha": head.get("sha"),
        "head_repo_full_name": head_repo.get("full_name") if head_repo else None,
        "base_ref": base.get("ref"),
        "author": _login(_obj(pr, "user")),
        "author_association": pr.get("author_association"),
        "labels": _names(pr.get("labels"), "name"),
        "html_url": pr.get("html_url"),
    }


def _trim_review(review: Mapping[str, Any]) -> dict[str, Any]:
    body, cut = _text(review.get("body"))
    return {
        "id": review.get("id"),
        "state": review.get("state"),
        "body": body,
        "body_truncated": cut,
        "author": _actor(_obj(review, "user")),
        "author_association": review.get("author_association"),
        "commit_id": review.get("commit_id"),
        "submitted_at": review.get("submitted_at"),
    }


def _pr_numbers(items: Any) -> list[int]:
    if not isinstance(items, list):
        return []
    numbers = [item.get("number") for item in items if isinstance(item, Mapping)]
    return sorted({n for n in numbers if isinstance(n, int)})[:MAX_LIST_ITEMS]


def _trim_check(check: Mapping[str, Any], kind: str) -> dict[str, Any]:
    suite = _obj(check, "check_suite") if kind == "check_run" else check
    app = _obj(check, "app") or (_obj(suite, "app") if suite else None)
    return {
        "id": check.get("id"),
        "kind": kind,
        "name": check.get("name"),
        "status": check.get("status"),
        "conclusion": check.get("conclusion"),
        "head_sha": check.get("head_sha"),
        "head_branch": suite.get("head_branch") if suite else None,
        "app_slug": app.get("slug") if app else None,
        "pull_request_numbers": _pr_numbers(check.get("pull_requests")),
    }


def _trim_status(payload: Mapping[str, Any]) -> dict[str, Any]:
    description, _ = _text(payload.get("description"), MAX_TITLE_BYTES)
    return {
        "sha": payload.get("sha"),
        "state": payload.get("state"),
        "context": payload.get("context"),
        "description": description or None,
        "target_url": payload.get("target_url"),
        "branches": _names(payload.get("branches"), "name"),
    }


def _trim_merge_group(group: Mapping[str, Any], reason: Any) -> dict[str, Any]:
    head_ref = group.get("head_ref")
    named = group_of(head_ref) if isinstance(head_ref, str) else None
    return {
        "head_sha": group.get("head_sha"),
        "head_ref": head_ref,
        "base_ref": group.get("base_ref"),
        "base_sha": group.get("base_sha"),
        "reason": reason if isinstance(reason, str) else None,
        "pr_number": named[1] if named else None,
        "pr_head_sha": named[2] if named else None,
    }


#: Where each event keeps the time of the change it reports.
_OCCURRED_AT: Mapping[str, tuple[str, ...]] = {
    "issues": ("issue", "updated_at"),
    "issue_comment": ("comment", "updated_at"),
    "pull_request": ("pull_request", "updated_at"),
    "pull_request_review": ("review", "submitted_at"),
    "pull_request_review_comment": ("comment", "updated_at"),
    "check_run": ("check_run", "completed_at"),
    "check_suite": ("check_suite", "updated_at"),
    "status": ("updated_at",),
    "milestone": ("milestone", "updated_at"),
}


def _occurred_at(event: str, payload: Mapping[str, Any]) -> Any:
    value: Any = payload
    for key in _OCCURRED_AT.get(event, ()):
        value = value.get(key) if isinstance(value, Mapping) else None
    return value if isinstance(value, str) and value else None


def build_envelope(
    *, event: str, delivery_id: str, payload: Mapping[str, Any], received_at: datetime
) -> EventEnvelope:
    """Trim a routed event's payload into an envelope.

    Raises :class:`EnvelopeError` naming the first missing or malformed field.
    """
    repository = _obj(payload, "repository")
    if repository is None:
        raise EnvelopeError(event, "the payload has no 'repository' object")
    sender = _obj(payload, "sender")
    if sender is None:
        raise EnvelopeError(event, "the payload has no 'sender' object")
    action = payload.get("action")
    installation = _obj(payload, "installation")
    fields: dict[str, Any] = {
        "delivery_id": delivery_id,
        "event": event,
        "action": action if isinstance(action, str) else None,
        "received_at": received_at,
        "occurred_at": _occurred_at(event, payload),
        "installation_id": installation.get("id") if installation else None,
        "repository": {
            "id": repository.get("id"),
            "full_name": repository.get("full_name"),
            "default_branch": repository.get("default_branch"),
            "private": bool(repository.get("private")),
        },
        "sender": _actor(sender),
    }
    if (issue := _obj(payload, "issue")) is not None:
        fields["issue"] = _trim_issue(issue)
    if (pr := _obj(payload, "pull_request")) is not None:
        fields["pull_request"] = _trim_pull_request(pr)
    if (comment := _obj(payload, "comment")) is not None:
        kind = "review_comment" if event == "pull_request_review_comment" else "issue_comment"
        fields["comment"] = _trim_comment(comment, kind)
    if (review := _obj(payload, "review")) is not None:
        fields["review"] = _trim_review(review)
    if event in ("check_run", "check_suite") and (check := _obj(payload, event)) is not None:
        fields["check"] = _trim_check(check, event)
    if event == "status":
        fields["status"] = _trim_status(payload)
    if event == "merge_group" and (group := _obj(payload, "merge_group")) is not None:
        fields["merge_group"] = _trim_merge_group(group, payload.get("reason"))
    if (label := _obj(payload, "label")) is not None and isinstance(label.get("name"), str):
        fields["label"] = label["name"]
    if (assignee := _obj(payload, "assignee")) is not None:
        fields["assignee"] = _actor(assignee)
    if event == "milestone" and (milestone := _obj(payload, "milestone")) is not None:
        title, _ = _text(milestone.get("title"), MAX_TITLE_BYTES)
        fields["milestone"] = {
            "number": milestone.get("number"),
            "title": title,
            "created_at": milestone.get("created_at"),
            "closed_at": milestone.get("closed_at"),
            "html_url": milestone.get("html_url"),
        }
    try:
        return EventEnvelope.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise EnvelopeError(event, f"{where}: {first['msg']}") from exc


def command_envelope(
    command: SquadronCommand,
    *,
    repository: Mapping[str, Any],
    installation_id: int | None,
    delivery_id: str,
    now: datetime,
    origin: Literal["squadron", "reconciler", "agent"] = "squadron",
) -> EventEnvelope:
    """A framework command as an envelope for events.fifo (in its issue's message group)."""
    return EventEnvelope.model_validate(
        {
            "delivery_id": delivery_id[-128:],
            "event": SQUADRON_EVENT,
            "action": command.type,
            "origin": origin,
            "received_at": now,
            "occurred_at": now,
            "installation_id": installation_id,
            "repository": {
                "id": repository.get("id"),
                "full_name": repository.get("full_name"),
                "default_branch": repository.get("default_branch"),
            },
            "sender": {"login": "squadron[bot]", "id": 0, "type": "Bot"},
            "command": command.model_dump(),
        }
    )
