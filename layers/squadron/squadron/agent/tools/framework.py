"""The framework tools as the Copilot SDK sees them: every tool's spec, its handler guarded.

:class:`FrameworkTools` composes each topic's tools; :meth:`FrameworkTools.guarded` turns a
refusal, a tripped breaker or a GitHub or git error into a message to the model, never a
crash of the task.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from squadron.adapters.copilot import ToolSpec
from squadron.adapters.git import GitError
from squadron.adapters.github.errors import GitHubError
from squadron.agent.tools.blockers import BlockerTools
from squadron.agent.tools.change_sets import ChangeSetTools
from squadron.agent.tools.issues import IssueTools
from squadron.agent.tools.memory import MemoryTools
from squadron.agent.tools.params import (
    AssignIssue,
    Comment,
    CreateBlockerIssue,
    CreateIssue,
    EscalateToHuman,
    GitPush,
    LabelIssue,
    NoParams,
    OpenPr,
    PostStatus,
    ProposeChangeSet,
    PublishArtifact,
    ReadArtifact,
    ReadIssue,
    Recall,
    RegisterBlockerParams,
    Remember,
    ReportBlocked,
    ReportComplete,
    SubmitReview,
)
from squadron.agent.tools.pull_requests import PullRequestTools
from squadron.agent.tools.task import TaskTools
from squadron.domain.launches import LaunchRefusedError
from squadron.domain.permissions import PermissionDeniedError


class FrameworkTools(TaskTools, IssueTools, BlockerTools, PullRequestTools, MemoryTools, ChangeSetTools):
    """Every framework tool of one agent's task: each topic's tools, offered as specs."""

    def specs(self) -> dict[str, ToolSpec]:
        """Every framework tool, its handler guarded (refusals, breakers and errors become text)."""
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
                    "create_blocker_issue",
                    "File a new issue for work that must be done before yours can go on (a missing API, "
                    "a bug elsewhere): your work in progress is pushed, your session sleeps and wakes "
                    "when the new issue is closed. End your turn right after calling this.",
                    CreateBlockerIssue,
                    self.create_blocker_issue,
                ),
                ToolSpec(
                    "git_push",
                    "Commit every change in your working copy (with message) and push your own branch. "
                    "Never force: if the remote has new commits, merge them first.",
                    GitPush,
                    self.git_push,
                ),
                ToolSpec(
                    "open_pr",
                    "Open a pull request from your own branch (your work is committed and pushed first).",
                    OpenPr,
                    self.open_pr,
                ),
                ToolSpec(
                    "read_pull_request",
                    "Read your pull request: title, description, and every changed file with its diff.",
                    NoParams,
                    self.read_pull_request,
                ),
                ToolSpec(
                    "label_issue",
                    "Add labels from the project's taxonomy to an issue.",
                    LabelIssue,
                    self.label_issue,
                ),
                ToolSpec(
                    "assign_issue",
                    "Assign an issue to a dev role: an agent of that role starts on it.",
                    AssignIssue,
                    self.assign_issue,
                ),
                ToolSpec("create_issue", "Open a new issue.", CreateIssue, self.create_issue),
                ToolSpec(
                    "register_blocker",
                    "Record that an issue cannot go on until another open issue is closed (its agent "
                    "sleeps until then).",
                    RegisterBlockerParams,
                    self.register_blocker,
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
                    "remember",
                    "Propose a fact to this repository's memory, with the issue, pull request or comment "
                    "that taught it. Only you see it until a person confirms it (merging your pull request "
                    "lists it for them).",
                    Remember,
                    self.remember,
                ),
                ToolSpec(
                    "recall",
                    "Search this repository's memory: facts people confirmed, and your own proposals.",
                    Recall,
                    self.recall,
                ),
                ToolSpec(
                    "publish_artifact",
                    "Publish (or revise) an artifact for other agents, such as your plan for an issue tree: "
                    "its producer and the agents that read it are recorded.",
                    PublishArtifact,
                    self.publish_artifact,
                ),
                ToolSpec(
                    "read_artifact",
                    "Read an artifact another agent produced for your issue (or the repository).",
                    ReadArtifact,
                    self.read_artifact,
                ),
                ToolSpec(
                    "propose_change_set",
                    "Propose one change across several repositories of the App's installation (a change set) "
                    "for an issue of this repository: its repositories, which needs which, and your plan. "
                    "A writer of each repository must approve it before anything starts.",
                    ProposeChangeSet,
                    self.propose_change_set,
                ),
                ToolSpec(
                    "escalate_to_human",
                    "Hand the issue to humans when you cannot decide or proceed. End your turn after it.",
                    EscalateToHuman,
                    self.escalate_to_human,
                ),
            )
        }

    def guarded(self, handler: Callable[[Any], str]) -> Callable[[Any], str]:
        """Refusals and GitHub errors reach the model as text, never as a crash; a tripped
        breaker refuses every tool here too, whether or not the pre-tool-use hook ran."""

        def run(params: Any) -> str:
            stopped = self.stopped()
            if stopped is not None:
                return f"denied: {stopped}"
            try:
                return handler(params)
            except PermissionDeniedError as exc:
                return f"denied: {exc}"
            except GitHubError as exc:
                return f"GitHub refused: {exc}"
            except GitError as exc:
                return f"git failed: {exc}"
            except LaunchRefusedError as exc:
                if exc.code == "github_refused":
                    return f"GitHub refused: {exc}"
                if exc.code == "forbidden":
                    return f"denied: {exc}"
                if exc.code == "secret_found":  # the write looked like it leaks a secret: humans check
                    self.state.ending = "escalate"
                    self.state.reason = f"a write was refused: {exc}"
                    return f"Squadron refused: {exc}. End your turn with a short summary (no secret in it)."
                return f"Squadron refused: {exc}"

        return run
