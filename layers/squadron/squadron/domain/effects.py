"""Effects: what the router decided, as plain data the shell carries out.

Registry effects carry the new record and the version they expect to replace,
so applying one twice, or after somebody else's write, fails its condition
instead of overwriting newer state. Effects are applied in the order given:
GitHub calls, then registry writes, then task launches (whose tokens make a
repeated launch a no-op on ECS).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from squadron.domain.agents import AgentRecord, InboxItem, IssueState


@dataclass(frozen=True)
class AgentWrite:
    """Store ``record``; ``expected_version`` None means it must not exist yet."""

    record: AgentRecord
    expected_version: int | None


@dataclass(frozen=True)
class PutAgent:
    write: AgentWrite
    kind: Literal["put_agent"] = "put_agent"


@dataclass(frozen=True)
class SetIssueState:
    """Record an issue's state as of ``occurred_at`` (GitHub time); an older state never overwrites a newer one."""

    repo_id: int
    number: int
    state: IssueState
    occurred_at: datetime
    kind: Literal["set_issue_state"] = "set_issue_state"


@dataclass(frozen=True)
class SetIssueAssignment:
    """Record whether the App is assigned to the issue as of ``occurred_at``; older news never wins."""

    repo_id: int
    number: int
    assigned: bool
    occurred_at: datetime
    kind: Literal["set_issue_assignment"] = "set_issue_assignment"


@dataclass(frozen=True)
class AddBlocker:
    """Store ``issue`` blocked by ``blocker`` (both directions), only while ``blocker`` is not closed."""

    repo_id: int
    issue: int
    blocker: int
    agent: AgentWrite | None = None
    kind: Literal["add_blocker"] = "add_blocker"


@dataclass(frozen=True)
class RemoveBlocker:
    repo_id: int
    issue: int
    blocker: int
    agent: AgentWrite | None = None
    kind: Literal["remove_blocker"] = "remove_blocker"


@dataclass(frozen=True)
class LinkPullRequest:
    repo_id: int
    pr_number: int
    issue_number: int
    agent: AgentWrite | None = None
    kind: Literal["link_pull_request"] = "link_pull_request"


@dataclass(frozen=True)
class DeliverInbox:
    item: InboxItem
    kind: Literal["deliver_inbox"] = "deliver_inbox"


@dataclass(frozen=True)
class RecordReview:
    repo_id: int
    pr_number: int
    reviewer: str
    state: str
    commit_id: str | None
    review_id: int
    kind: Literal["record_review"] = "record_review"


@dataclass(frozen=True)
class LaunchAgent:
    """Start a task for the agent (``start``) or resume its session (``wake``).

    ``token`` is unique per decision (agent id and record version) and is the
    ECS client token, so a retried launch never starts a second task.
    """

    agent_id: str
    purpose: Literal["start", "wake"]
    reason: str
    token: str
    kind: Literal["launch_agent"] = "launch_agent"


@dataclass(frozen=True)
class StopAgentTask:
    agent_id: str
    task_arn: str
    reason: str
    kind: Literal["stop_agent_task"] = "stop_agent_task"


@dataclass(frozen=True)
class PostComment:
    repo_full_name: str
    installation_id: int | None
    number: int
    body: str
    author: str
    kind: Literal["post_comment"] = "post_comment"


@dataclass(frozen=True)
class CloseIssue:
    repo_full_name: str
    installation_id: int | None
    number: int
    reason: str
    kind: Literal["close_issue"] = "close_issue"


@dataclass(frozen=True)
class AddLabels:
    repo_full_name: str
    installation_id: int | None
    number: int
    labels: tuple[str, ...]
    kind: Literal["add_labels"] = "add_labels"


@dataclass(frozen=True)
class CreateIssue:
    """A new issue written by the framework (a needs-human issue)."""

    repo_full_name: str
    installation_id: int | None
    title: str
    body: str
    labels: tuple[str, ...] = ()
    assignees: tuple[str, ...] = ()
    kind: Literal["create_issue"] = "create_issue"


@dataclass(frozen=True)
class EvaluateMerge:
    """Judge a pull request against its approval flow: post squadron/merge, merge when allowed."""

    repo_full_name: str
    installation_id: int | None
    pr_number: int
    #: The dev role whose agent wrote the PR (never counted as its own reviewer).
    author_role: str | None = None
    #: That agent's issue (a conflict is reported to it), and the delivery that asked for the
    #: judgement (a conflict report is one per judgement: a replay repeats its id).
    issue_number: int | None = None
    cause: str = ""
    kind: Literal["evaluate_merge"] = "evaluate_merge"


@dataclass(frozen=True)
class FileBlockerIssue:
    """Open an issue for humans and put ``agent_id`` to sleep on it (its number is GitHub's)."""

    repo_full_name: str
    installation_id: int | None
    agent_id: str
    launch_token: str
    issue_number: int
    title: str
    body: str
    labels: tuple[str, ...] = ()
    assignees: tuple[str, ...] = ()
    kind: Literal["file_blocker_issue"] = "file_blocker_issue"


@dataclass(frozen=True)
class Discard:
    """Nothing to do; ``reason`` is logged and counted.

    ``rule`` names the authority rule that refused a human input
    (:class:`squadron.domain.authority.Rule`), counted by rule.
    """

    reason: str
    kind: Literal["discard"] = "discard"
    rule: str | None = None


Effect = (
    PutAgent
    | SetIssueState
    | SetIssueAssignment
    | AddBlocker
    | RemoveBlocker
    | LinkPullRequest
    | DeliverInbox
    | RecordReview
    | LaunchAgent
    | StopAgentTask
    | PostComment
    | CloseIssue
    | AddLabels
    | CreateIssue
    | EvaluateMerge
    | FileBlockerIssue
    | Discard
)

GITHUB_EFFECTS = (PostComment, CloseIssue, AddLabels, CreateIssue)
TASK_EFFECTS = (LaunchAgent, StopAgentTask)
#: Judged last, after the registry reflects the event (the gate reads GitHub, not the registry).
GATE_EFFECTS = (EvaluateMerge, FileBlockerIssue)


def apply_order(effects: list[Effect]) -> list[Effect]:
    """GitHub effects first, registry writes second, tasks third, the merge gate fourth, discards last."""

    def rank(effect: Effect) -> int:
        if isinstance(effect, GITHUB_EFFECTS):
            return 0
        if isinstance(effect, TASK_EFFECTS):
            return 2
        if isinstance(effect, GATE_EFFECTS):
            return 3
        if isinstance(effect, Discard):
            return 4
        return 1

    return sorted(effects, key=rank)


def agent_writes(effects: Iterable[Effect]) -> Iterator[AgentWrite]:
    """Every agent record the effects write, in order."""
    for effect in effects:
        if isinstance(effect, PutAgent):
            yield effect.write
        elif isinstance(effect, AddBlocker | RemoveBlocker | LinkPullRequest) and effect.agent is not None:
            yield effect.agent


def status_changes(before: Iterable[AgentRecord], effects: Iterable[Effect]) -> tuple[str, ...]:
    """``"OLD>NEW"`` for each agent status the effects change (``NEW`` for an agent they create).

    ``before`` are the records the decision was made on (the snapshot's agents).
    """
    status: dict[str, str] = {agent.agent_id: agent.status.value for agent in before}
    changes: list[str] = []
    for write in agent_writes(effects):
        old = status.get(write.record.agent_id, "NEW")
        new = write.record.status.value
        if old != new:
            changes.append(f"{old}>{new}")
        status[write.record.agent_id] = new
    return tuple(changes)
