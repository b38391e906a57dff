"""Framework tools: the agent's only bridge to Squadron and GitHub.

Each tool validates its arguments with a pydantic model (the Copilot SDK turns
it into the JSON schema the model sees), goes through the role-enforcing
GitHub client, and answers the model in words: a refused action or a GitHub
error becomes a clear message to the model, never a crash of the task.
Tools that end the task (report_blocked, escalate_to_human) tell the host
through :class:`HostState`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from squadron.adapters.github.client import GitHubClient
from squadron.adapters.github.errors import GitHubError
from squadron.domain.agents import AgentRecord, InboxItem
from squadron.domain.events import SQUADRON_EVENT, EventEnvelope, RegisterBlocker, build_envelope
from squadron.domain.permissions import REVIEW_EVENT_ACTIONS, Action, PermissionDeniedError, check
from squadron.ports import EventQueue


class Inbox(Protocol):
    def pending_inbox(self, agent_id: str) -> list[InboxItem]: ...
    def ack_inbox(self, agent_id: str, items: list[InboxItem]) -> None: ...


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NoParams(_Params):
    pass


class ReadIssue(_Params):
    number: int | None = Field(default=None, gt=0, description="Issue number; defaults to your own issue.")


class Comment(_Params):
    body: str = Field(min_length=1, max_length=60_000, description="Markdown comment on your issue.")


class ReportBlocked(_Params):
    blocker_issue: int = Field(
        gt=0, description="The open issue that must be closed before you can continue."
    )
    reason: str = Field(min_length=1, max_length=2_000, description="What you need from it.")


class OpenPr(_Params):
    title: str = Field(min_length=1, max_length=256)
    body: str = Field(
        min_length=1, max_length=60_000, description="What changed and how it was tested; 'Closes #N'."
    )
    base: str | None = Field(default=None, description="Target branch; defaults to the default branch.")
    draft: bool = False


class ReportComplete(_Params):
    summary: str = Field(min_length=1, max_length=8_000, description="What you did, for the issue's readers.")


class SubmitReview(_Params):
    event: Literal["APPROVE", "REQUEST_CHANGES", "COMMENT"]
    body: str = Field(min_length=1, max_length=60_000)


class PostStatus(_Params):
    state: Literal["success", "failure", "pending", "error"]
    description: str = Field(min_length=1, max_length=140)


class EscalateToHuman(_Params):
    reason: str = Field(min_length=1, max_length=4_000, description="What a human must decide or do.")


@dataclass
class HostState:
    """What the tools decided about the task's end; the host acts on it after the turn."""

    ending: Literal["sleep", "escalate", "complete"] | None = None
    reason: str = ""
    commands: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    params: type[BaseModel]
    handler: Callable[[Any], str]


class FrameworkTools:
    def __init__(
        self,
        *,
        agent: AgentRecord,
        launch_token: str,
        inbox: Inbox,
        queue: EventQueue,
        github: GitHubClient,
        state: HostState,
        clock: Callable[[], datetime],
        default_branch: str = "main",
    ) -> None:
        self.agent = agent
        self.launch_token = launch_token
        self.inbox = inbox
        self.queue = queue
        self.github = github
        self.state = state
        self.clock = clock
        self.default_branch = default_branch

    def specs(self) -> dict[str, ToolSpec]:
        """Every framework tool, its handler guarded (refusals and GitHub errors become text)."""
        return {
            spec.name: replace(spec, handler=self.guarded(spec.handler))
            for spec in (
                ToolSpec(
                    "check_for_events",
                    "Read what happened since you last looked: comments, reviews, failed checks, closed blockers.",
                    NoParams,
                    self.check_for_events,
                ),
                ToolSpec("read_issue", "Read an issue and its comments.", ReadIssue, self.read_issue),
                ToolSpec("comment", "Comment on your issue (tagged with your role).", Comment, self.comment),
                ToolSpec(
                    "report_blocked",
                    "You cannot continue until another open issue is closed: your session sleeps and "
                    "wakes when it closes. End your turn right after calling this.",
                    ReportBlocked,
                    self.report_blocked,
                ),
                ToolSpec(
                    "open_pr",
                    "Open a pull request from your own branch (push your commits first).",
                    OpenPr,
                    self.open_pr,
                ),
                ToolSpec(
                    "submit_review",
                    "Submit your review of the pull request you review.",
                    SubmitReview,
                    self.submit_review,
                ),
                ToolSpec(
                    "post_status",
                    "Post your role's commit status (squadron/<role>) on the pull request's head.",
                    PostStatus,
                    self.post_status,
                ),
                ToolSpec(
                    "report_complete",
                    "Your assignment is done for now: your task ends and you are woken by the next event "
                    "for you (a review, a comment, a failed check). End your turn after it.",
                    ReportComplete,
                    self.report_complete,
                ),
                ToolSpec(
                    "escalate_to_human",
                    "Hand the issue to humans when you cannot decide or proceed. End your turn after it.",
                    EscalateToHuman,
                    self.escalate_to_human,
                ),
            )
        }

    @staticmethod
    def guarded(handler: Callable[[Any], str]) -> Callable[[Any], str]:
        """Refusals and GitHub errors reach the model as text, never as a crash."""

        def run(params: Any) -> str:
            try:
                return handler(params)
            except PermissionDeniedError as exc:
                return f"denied: {exc}"
            except GitHubError as exc:
                return f"GitHub refused: {exc}"

        return run

    # --- tools ---------------------------------------------------------------------------------

    def check_for_events(self, params: NoParams) -> str:
        items = self.inbox.pending_inbox(self.agent.agent_id)
        if not items:
            return "No new events."
        self.inbox.ack_inbox(self.agent.agent_id, items)
        return "\n".join(
            f"- [{item.kind}] {item.summary}" + (f"\n  {item.body}" if item.body else "") for item in items
        )

    def read_issue(self, params: ReadIssue) -> str:
        number = params.number or self.agent.issue_number
        if number is None:
            return "Which issue? You have none of your own: pass number."
        issue = self.github.get_issue(number)
        comments = self.github.list_comments(number)
        lines = [f"#{number} [{issue.get('state')}] {issue.get('title')}", str(issue.get("body") or "")]
        lines += [f"--- {c.get('user', {}).get('login', '?')}: {c.get('body', '')}" for c in comments]
        return "\n".join(lines)

    def comment(self, params: Comment) -> str:
        if self.agent.issue_number is None:
            return "You have no issue of your own to comment on."
        created = self.github.comment(self.agent.issue_number, params.body)
        return f"Commented on #{self.agent.issue_number} (comment {created.get('id')})."

    def report_blocked(self, params: ReportBlocked) -> str:
        if self.agent.issue_number is None:
            return "Only an agent working on an issue can be blocked."
        if params.blocker_issue == self.agent.issue_number:
            return f"#{params.blocker_issue} is your own issue; it cannot block itself."
        command = RegisterBlocker(
            issue_number=self.agent.issue_number,
            blocker_number=params.blocker_issue,
            agent_id=self.agent.agent_id,
            launch_token=self.launch_token,
            sleep=True,
            note=params.reason,
        )
        self.queue.send(self._command(command, f"blocked-{params.blocker_issue}"))
        self.state.ending = "sleep"
        self.state.reason = f"blocked by #{params.blocker_issue}: {params.reason}"
        self.state.commands.append(f"register_blocker #{params.blocker_issue}")
        return (
            f"Registered: #{self.agent.issue_number} is blocked by #{params.blocker_issue}. Your session "
            "sleeps now and wakes when it closes; end your turn with a one-line status."
        )

    def open_pr(self, params: OpenPr) -> str:
        check(self.github.caller, Action.OPEN_PR, branch=self.agent.branch)
        pr = self.github.create_pull(
            title=params.title,
            head=self.agent.branch or "",
            base=params.base or self.default_branch,
            body=params.body,
            draft=params.draft,
        )
        # The App's own webhooks are dropped at the ingress: tell the router ourselves, so the
        # PR is linked to the issue and its reviewers start.
        self.queue.send(self._echo("pull_request", "opened", {"pull_request": pr}, f"pr-{pr['number']}"))
        return f"Opened PR #{pr['number']} from {self.agent.branch}."

    def _pr(self) -> dict[str, Any] | str:
        if self.agent.pr_number is None:
            return "You have no pull request to review."
        pr: dict[str, Any] = self.github.get_pull(self.agent.pr_number)
        return pr

    def submit_review(self, params: SubmitReview) -> str:
        check(self.github.caller, REVIEW_EVENT_ACTIONS[params.event])  # before reading anything
        pr = self._pr()
        if isinstance(pr, str):
            return pr
        sha = str(pr.get("head", {}).get("sha") or "") or None
        review = self.github.create_review(int(pr["number"]), params.event, params.body, commit_id=sha)
        return f"Review {review.get('id')} submitted on PR #{pr['number']} ({params.event})."

    def post_status(self, params: PostStatus) -> str:
        context = f"squadron/{self.agent.role}"
        check(self.github.caller, Action.POST_STATUS, status_context=context)  # before reading anything
        pr = self._pr()
        if isinstance(pr, str):
            return pr
        sha = str(pr.get("head", {}).get("sha") or "")
        if not sha:
            return f"PR #{pr['number']} has no head commit yet."
        self.github.create_status(sha, state=params.state, context=context, description=params.description)
        return f"Posted {context} = {params.state} on {sha[:7]}."

    def report_complete(self, params: ReportComplete) -> str:
        number = self.agent.issue_number if self.agent.pr_number is None else self.agent.pr_number
        if number is not None:
            self.github.comment(number, params.summary)
        self.state.ending = "complete"
        self.state.reason = params.summary
        return "Recorded. Your task ends now; you will be woken by the next event for you."

    def escalate_to_human(self, params: EscalateToHuman) -> str:
        self.state.ending = "escalate"
        self.state.reason = params.reason
        return "Escalated: humans will take it from here. End your turn with a short summary."

    def _echo(self, event: str, action: str, parts: dict[str, Any], what: str) -> EventEnvelope:
        """The webhook GitHub would have sent for the App's own action, as a framework envelope."""
        payload = {
            "action": action,
            **parts,
            "repository": {
                "id": self.agent.repo_id,
                "full_name": self.agent.repo_full_name,
                "default_branch": self.default_branch,
            },
            "sender": {"login": "squadron[bot]", "id": 0, "type": "Bot"},
            "installation": {"id": self.agent.installation_id} if self.agent.installation_id else None,
        }
        envelope = build_envelope(
            event=event,
            delivery_id=f"echo-{self.launch_token}-{what}"[-128:],
            payload=payload,
            received_at=self.clock(),
        )
        return envelope.model_copy(update={"origin": "squadron"})

    def _command(self, command: RegisterBlocker, what: str) -> EventEnvelope:
        now = self.clock()
        return EventEnvelope.model_validate(
            {
                # One delivery per (task, command): a retried send is deduplicated by the queue.
                "delivery_id": f"cmd-{self.launch_token}-{what}"[-128:],
                "event": SQUADRON_EVENT,
                "action": command.type,
                "origin": "squadron",
                "received_at": now,
                "occurred_at": now,
                "installation_id": self.agent.installation_id,
                "repository": {
                    "id": self.agent.repo_id,
                    "full_name": self.agent.repo_full_name,
                    "default_branch": self.default_branch,
                },
                "sender": {"login": "squadron[bot]", "id": 0, "type": "Bot"},
                "command": command.model_dump(),
            }
        )
