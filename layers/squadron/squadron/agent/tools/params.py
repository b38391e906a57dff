"""What a model may pass to each framework tool: one pydantic model per tool.

The Copilot SDK turns each model into the JSON schema the model sees and validates every
call's arguments with it before the tool runs: numbers are strict, lengths are bounded, and
no text may hold a NUL (no git argument can).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from squadron.domain.commands import MAX_OUTPUTS, OutputKey, OutputValue

#: An issue or pull request number: a JSON integer from 1 to 2^31-1 (never true, 3.0 or "3").
IssueNumber = Annotated[int, Field(strict=True, gt=0, le=2**31 - 1)]
#: A label of the taxonomy (GitHub's names are at most 50 characters).
LabelName = Annotated[str, Field(min_length=1, max_length=50)]


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @field_validator("*", mode="after")
    @classmethod
    def _text_only(cls, value: Any) -> Any:
        for item in value if isinstance(value, list) else [value]:
            # No git argument can hold a NUL (pydantic itself refuses lone surrogates).
            if isinstance(item, str) and "\x00" in item:
                raise ValueError("text may not contain a NUL character")
        return value


class NoParams(_Params):
    pass


class ReadIssue(_Params):
    number: IssueNumber | None = Field(default=None, description="Issue number; defaults to your own issue.")


class Comment(_Params):
    body: str = Field(min_length=1, max_length=60_000, description="Markdown comment.")
    number: IssueNumber | None = Field(
        default=None,
        description="Issue or pull request to comment on; defaults to your own (the PM names one).",
    )


class ReportBlocked(_Params):
    blocker_issue: IssueNumber = Field(
        description="The open issue that must be closed before you can continue."
    )
    reason: str = Field(min_length=1, max_length=2_000, description="What you need from it.")


class OpenPr(_Params):
    title: str = Field(min_length=1, max_length=256)
    body: str = Field(
        min_length=1, max_length=60_000, description="What changed and how it was tested; 'Closes #N'."
    )
    base: str | None = Field(
        default=None,
        min_length=1,
        max_length=255,
        description="Target branch; defaults to the default branch.",
    )
    draft: bool = False


class ReportComplete(_Params):
    summary: str = Field(min_length=1, max_length=8_000, description="What you did, for the issue's readers.")
    outputs: dict[OutputKey, OutputValue] = Field(
        default_factory=dict,
        max_length=MAX_OUTPUTS,
        description="What your work produced, by name: the outputs a pipeline stage's instruction asks for.",
    )

    @field_validator("outputs", mode="after")
    @classmethod
    def _outputs_text_only(cls, value: dict[str, str]) -> dict[str, str]:
        if any("\x00" in text for pair in value.items() for text in pair):
            raise ValueError("text may not contain a NUL character")
        return value


class SubmitReview(_Params):
    event: Literal["APPROVE", "REQUEST_CHANGES", "COMMENT"]
    body: str = Field(min_length=1, max_length=60_000)


class PostStatus(_Params):
    state: Literal["success", "failure", "pending", "error"]
    description: str = Field(min_length=1, max_length=140)


class GitPush(_Params):
    message: str | None = Field(
        default=None,
        min_length=1,
        max_length=2_000,
        description="Commit message for changes not committed yet (all of them are committed first).",
    )


class CreateBlockerIssue(_Params):
    title: str = Field(min_length=1, max_length=256, description="Title of the new issue.")
    body: str = Field(
        min_length=1, max_length=60_000, description="What must be done, and why your issue needs it."
    )
    reason: str = Field(min_length=1, max_length=2_000, description="What you need from it, for your issue.")


class RegisterBlockerParams(_Params):
    issue: IssueNumber = Field(description="The issue that cannot go on.")
    blocked_by: IssueNumber = Field(description="The open issue it waits for.")
    reason: str = Field(default="", max_length=2_000)


class LabelIssue(_Params):
    number: IssueNumber
    labels: list[LabelName] = Field(min_length=1, max_length=10, description="Labels from the taxonomy.")


class AssignIssue(_Params):
    number: IssueNumber
    role: str = Field(
        min_length=1,
        max_length=64,
        pattern=r"^[a-z0-9][a-z0-9-]*$",
        description="The dev role that should work on it.",
    )


class CreateIssue(_Params):
    title: str = Field(min_length=1, max_length=256)
    body: str = Field(min_length=1, max_length=60_000)
    labels: list[LabelName] = Field(
        default_factory=list, max_length=10, description="Labels from the taxonomy."
    )


class Remember(_Params):
    fact: str = Field(
        min_length=1,
        max_length=500,
        description="One fact about this repository worth knowing next time (how to build, a convention, "
        "a pitfall), in a sentence or two. Never secrets, never instructions to other agents.",
    )
    evidence: str = Field(
        min_length=1,
        max_length=300,
        description="What taught it: '#12', 'PR #34', or the GitHub link of the issue, pull request or comment.",
    )
    audience: Literal["repository", "role"] = Field(
        default="repository",
        description="'repository': every agent once confirmed; 'role': only agents of your kind (dev, review, pm).",
    )


class Recall(_Params):
    query: str = Field(
        default="", max_length=500, description="Words to look for; empty: the most used facts."
    )


class PublishArtifact(_Params):
    name: str = Field(
        pattern=r"^[a-z0-9][a-z0-9-]{0,63}$", description="Its name, e.g. 'plan' (lowercase, digits, dashes)."
    )
    content: str = Field(min_length=1, max_length=16_000, description="Its text (Markdown).")
    issue: IssueNumber | None = Field(
        default=None,
        description="The issue it is for; defaults to yours (the PM names one, or none for the repository).",
    )


class ReadArtifact(_Params):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,63}$", description="The artifact's name, e.g. 'plan'.")
    issue: IssueNumber | None = Field(default=None, description="The issue it is for; defaults to yours.")


#: A repository of the App's installation, as ``owner/name`` (GitHub's own bounds).
RepositoryName = Annotated[
    str, Field(min_length=3, max_length=140, pattern=r"^[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}$")
]


class Dependency(_Params):
    repository: RepositoryName = Field(description="The repository whose change needs another's.")
    needs: RepositoryName = Field(description="The repository it needs (merged first).")


class ProposeChangeSet(_Params):
    issue: IssueNumber = Field(description="The issue of this repository the change is for (its origin).")
    repositories: list[RepositoryName] = Field(
        min_length=1,
        max_length=9,
        description="The other repositories of the App's installation the change spans (this one is added).",
    )
    dependencies: list[Dependency] = Field(
        default_factory=list,
        max_length=45,
        description="Which repository needs which: what is needed merges first.",
    )
    plan: str = Field(
        min_length=1,
        max_length=16_000,
        description="The plan: what changes in each repository and why (kept as an artifact named after the set).",
    )


class EscalateToHuman(_Params):
    reason: str = Field(min_length=1, max_length=4_000, description="What a human must decide or do.")
