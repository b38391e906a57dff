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
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from squadron.adapters.github.client import GitHubClient
from squadron.adapters.github.errors import GitHubError
from squadron.domain.agents import AgentRecord, InboxItem
from squadron.domain.events import SQUADRON_EVENT, EventEnvelope, RegisterBlocker
from squadron.domain.permissions import PermissionDeniedError
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


class EscalateToHuman(_Params):
    reason: str = Field(min_length=1, max_length=4_000, description="What a human must decide or do.")


@dataclass
class HostState:
    """What the tools decided about the task's end; the host acts on it after the turn."""

    ending: Literal["sleep", "escalate"] | None = None
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
        return {
            spec.name: spec
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

    def escalate_to_human(self, params: EscalateToHuman) -> str:
        self.state.ending = "escalate"
        self.state.reason = params.reason
        return "Escalated: humans will take it from here. End your turn with a short summary."

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
