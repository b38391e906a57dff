"""Framework tools: the agent's only bridge to Squadron and GitHub.

Each tool validates its arguments with a pydantic model (:mod:`.params`; the Copilot SDK
turns it into the JSON schema the model sees), goes through the role-enforcing
GitHub client, and answers the model in words: a refused action or a GitHub
error becomes a clear message to the model, never a crash of the task (:mod:`.framework`).
Tools that end the task (report_blocked, escalate_to_human) tell the host
through :class:`HostState`. What the router must hear (a blocker, the App's own
pull request or review, whose webhooks GitHub's ingress drops) goes through the
agent gateway (:class:`~squadron.agent.door.Door`), which stamps who sent it.

The tools are split by topic: :mod:`.task` (events, the task's end), :mod:`.issues`,
:mod:`.blockers`, :mod:`.pull_requests` and :mod:`.memory` (memory and artifacts), on the
common ground of :mod:`.base`; :class:`FrameworkTools` composes them.
"""

from squadron.adapters.copilot import ToolSpec
from squadron.agent.tools.base import FrameworkDoor, HostState
from squadron.agent.tools.framework import FrameworkTools
from squadron.agent.tools.issues import ISSUE_BUDGET, issue_text
from squadron.agent.tools.params import (
    AssignIssue,
    Comment,
    CreateBlockerIssue,
    CreateIssue,
    EscalateToHuman,
    GitPush,
    IssueNumber,
    LabelIssue,
    LabelName,
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
from squadron.agent.tools.pull_requests import PATCH_BUDGET

__all__ = [
    "ISSUE_BUDGET",
    "PATCH_BUDGET",
    "AssignIssue",
    "Comment",
    "CreateBlockerIssue",
    "CreateIssue",
    "EscalateToHuman",
    "FrameworkDoor",
    "FrameworkTools",
    "GitPush",
    "HostState",
    "IssueNumber",
    "LabelIssue",
    "LabelName",
    "NoParams",
    "OpenPr",
    "PostStatus",
    "ProposeChangeSet",
    "PublishArtifact",
    "ReadArtifact",
    "ReadIssue",
    "Recall",
    "RegisterBlockerParams",
    "Remember",
    "ReportBlocked",
    "ReportComplete",
    "SubmitReview",
    "ToolSpec",
    "issue_text",
]
