"""The parts of an event envelope: GitHub's objects trimmed to what routing reads, and their bounds.

Each model here is one object of a webhook payload (an issue, a comment, a pull request, a
review, a check, a status, a merge group, a milestone), typed and bounded: free text is cut to
:data:`MAX_BODY_BYTES` UTF-8 bytes and lists to :data:`MAX_LIST_ITEMS` items so an envelope
(:mod:`squadron.domain.events`) never nears the SQS limit. Pure.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

#: Upper bound for any one free-text field in an envelope, in UTF-8 bytes.
MAX_BODY_BYTES = 16 * 1024
#: Upper bound for titles, in UTF-8 bytes (GitHub allows 256 characters).
MAX_TITLE_BYTES = 1024
#: Upper bound for list fields (labels, assignees, branches, pull request numbers).
MAX_LIST_ITEMS = 100

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


class EnvelopeModel(BaseModel):
    """The base of an envelope and of each of its parts: frozen, and no field it does not name."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def is_bot_account(kind: object, login: str) -> bool:
    """Whether GitHub's account ``login`` (of type ``kind``) is a bot: typed ``Bot``, or its login
    ends in ``[bot]`` (which only an App's bot can have)."""
    return kind == "Bot" or login.endswith("[bot]")


class Actor(EnvelopeModel):
    """Who did something: a user, a bot or an organization."""

    login: Login
    id: ActorId
    type: Word = "User"

    @property
    def is_bot(self) -> bool:
        return is_bot_account(self.type, self.login)


class RepositoryRef(EnvelopeModel):
    id: GitHubId
    full_name: str = Field(min_length=3, max_length=256)
    default_branch: Ref | None = None
    private: bool = False


class IssueFields(EnvelopeModel):
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


class CommentFields(EnvelopeModel):
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


class PullRequestFields(EnvelopeModel):
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


class ReviewFields(EnvelopeModel):
    id: GitHubId
    state: Word
    body: str = ""
    body_truncated: bool = False
    author: Actor
    author_association: Word | None = None
    commit_id: Sha | None = None
    submitted_at: datetime | None = None


class MilestoneFields(EnvelopeModel):
    """A milestone (its ``closed`` webhook starts the repository's retrospective of it)."""

    number: IssueNumber
    title: str = ""
    created_at: datetime | None = None
    closed_at: datetime | None = None
    html_url: Url | None = None


class CheckFields(EnvelopeModel):
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


class MergeGroupFields(EnvelopeModel):
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


class StatusFields(EnvelopeModel):
    """A commit status (the ``status`` event)."""

    sha: Sha
    state: Word
    context: str = Field(max_length=1024)
    description: str | None = None
    target_url: Url | None = None
    branches: tuple[Ref, ...] = Field(default=(), max_length=MAX_LIST_ITEMS)
