"""What a pipeline tests: a stage's ``condition`` and a gate's checks (the reference's format).

A condition is one key of ``any``, ``all``, ``labels_include``, ``paths_match``, ``expr``, or a
string ``{{ expression }}``; a gate check one of eight on ``check`` (the reference's registry:
custom checks are refused). The router evaluates both when a stage's task asks
(:mod:`squadron.domain.pipelines.compile`); :mod:`.models` holds the stages that name them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Discriminator, Field, Tag

from squadron.domain.pipelines.limits import MAX_CONDITION_ITEMS, MAX_GATE_CONDITIONS, MAX_HUMAN_COUNT
from squadron.domain.pipelines.repo_paths import RepoPath
from squadron.domain.pipelines.types import BareExpression, ExpressionTemplate, Template, at_most
from squadron.domain.repo_config.types import PathGlob


# A pipeline definition's model: unknown keys refused, frozen (no docstring: a subclass would
# take it as its schema's description).
class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


_Model = StrictModel


def count_items(limit: int, name: str, what: str) -> BeforeValidator:
    """Past ``limit`` items, an error naming the bound (``60 stages, over the limit of 50 (MAX_STAGES)``),
    before any item is validated (a list of thousands costs nothing more than the count)."""

    def check(value: Any) -> Any:
        if isinstance(value, list | dict) and len(value) > limit:
            raise ValueError(f"{len(value)} {what}, over the limit of {limit} ({name})")
        return value

    return BeforeValidator(check)


HumanCount = Annotated[
    int,
    Field(ge=1, json_schema_extra={"maximum": MAX_HUMAN_COUNT}),
    at_most(MAX_HUMAN_COUNT, "MAX_HUMAN_COUNT", "completions"),
]


class AnyCondition(_Model):
    any: Annotated[
        list[Condition],
        Field(min_length=1),
        count_items(MAX_CONDITION_ITEMS, "MAX_CONDITION_ITEMS", "conditions"),
    ] = Field(description="True when one of these is (OR).")


class AllCondition(_Model):
    all: Annotated[
        list[Condition],
        Field(min_length=1),
        count_items(MAX_CONDITION_ITEMS, "MAX_CONDITION_ITEMS", "conditions"),
    ] = Field(description="True when every one of these is (AND).")


class LabelsIncludeCondition(_Model):
    labels_include: str = Field(
        min_length=1, description="True when the issue or pull request has this label."
    )


def _as_list(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


class PathsMatchCondition(_Model):
    paths_match: Annotated[
        list[PathGlob],
        BeforeValidator(_as_list),
        Field(min_length=1),
        count_items(MAX_CONDITION_ITEMS, "MAX_CONDITION_ITEMS", "globs"),
    ] = Field(description="True when a changed file matches one of these globs (`**` across directories).")


class ExprCondition(_Model):
    expr: BareExpression = Field(
        description="True when this expression (no braces) is, e.g. `context.env == 'prod'`."
    )


_CONDITION_KEYS = ("any", "all", "labels_include", "paths_match", "expr")


def _condition_tag(value: Any) -> str | None:
    if isinstance(value, str):
        return "template"
    if isinstance(value, dict) and len(value) == 1:
        key = next(iter(value))
        return key if key in _CONDITION_KEYS else None
    if isinstance(value, BaseModel):
        return next((key for key in _CONDITION_KEYS if key in type(value).model_fields), None)
    return None


Condition = Annotated[
    Annotated[AnyCondition, Tag("any")]
    | Annotated[AllCondition, Tag("all")]
    | Annotated[LabelsIncludeCondition, Tag("labels_include")]
    | Annotated[PathsMatchCondition, Tag("paths_match")]
    | Annotated[ExprCondition, Tag("expr")]
    | Annotated[ExpressionTemplate, Tag("template")],
    Discriminator(
        _condition_tag,
        custom_error_type="condition",
        custom_error_message=(
            "a condition is one key of any, all, labels_include, paths_match, expr "
            "(combine with any/all), or a string '{{ expression }}'"
        ),
    ),
]


# --- gate checks --------------------------------------------------------------------------------


class _Check(_Model):
    pr: int | Template | None = Field(
        default=None, description="The pull request checked, when not the run's (a number or a template)."
    )


def _command_expect(value: Any) -> Any:
    # The reference's documentation writes expect: "exit_code == 0"; its engine reads only
    # "success" (anything else expects a failure). Read as written.
    return (
        {"exit_code == 0": "success", "exit_code != 0": "failure"}.get(value, value)
        if isinstance(value, str)
        else value
    )


class CommandCheck(_Check):
    """Run a command in the repository's working copy; passes on the expected exit."""

    check: Literal["command"]
    run: str = Field(
        min_length=1,
        max_length=2000,
        description="The command (run in the agent's sandbox, never in the framework).",
    )
    expect: Annotated[Literal["success", "failure"], BeforeValidator(_command_expect)] = Field(
        default="success", description='success (exit 0; also written "exit_code == 0") or failure.'
    )


class FileExistsCheck(_Check):
    check: Literal["file_exists"]
    paths: Annotated[
        list[RepoPath], Field(min_length=1), count_items(MAX_CONDITION_ITEMS, "MAX_CONDITION_ITEMS", "paths")
    ] = Field(
        description="Paths (files or directories) that must all exist at the pull request's head "
        "(an issue's run: the default branch), read through GitHub."
    )


class PrApprovalsMetCheck(_Check):
    check: Literal["pr_approvals_met"]
    count: HumanCount = Field(default=1, description="Approvals needed.")
    scope: Literal["agents", "humans", "all"] = Field(default="all", description="Whose approvals count.")


class CiStatusCheck(_Check):
    check: Literal["ci_status"]
    workflows: Annotated[list[str], count_items(MAX_CONDITION_ITEMS, "MAX_CONDITION_ITEMS", "workflows")] = (
        Field(
            default_factory=list,
            description="Check names that must pass (none: every check of the head commit).",
        )
    )
    expect: Literal["success", "failure", "neutral", "skipped"] = Field(
        default="success", description="The conclusion required."
    )
    scope: str | None = Field(default=None, description="Accepted for the reference's files; not used.")


class LabelPresentCheck(_Check):
    check: Literal["label_present"]
    label: str = Field(min_length=1, description="The label that must be on the issue or pull request.")


class NoChangesRequestedCheck(_Check):
    check: Literal["no_changes_requested"]


class HumanApprovedCheck(_Check):
    check: Literal["human_approved"]
    count: HumanCount = Field(default=1, description="Human approvals needed.")


class BranchUpToDateCheck(_Check):
    check: Literal["branch_up_to_date"]


GateCheck = Annotated[
    CommandCheck
    | FileExistsCheck
    | PrApprovalsMetCheck
    | CiStatusCheck
    | LabelPresentCheck
    | NoChangesRequestedCheck
    | HumanApprovedCheck
    | BranchUpToDateCheck,
    Field(discriminator="check"),
]

#: Every gate check, by name (the reference's registry; custom checks are refused).
GATE_CHECKS: dict[str, type[_Check]] = {
    "command": CommandCheck,
    "file_exists": FileExistsCheck,
    "pr_approvals_met": PrApprovalsMetCheck,
    "ci_status": CiStatusCheck,
    "label_present": LabelPresentCheck,
    "no_changes_requested": NoChangesRequestedCheck,
    "human_approved": HumanApprovedCheck,
    "branch_up_to_date": BranchUpToDateCheck,
}
#: Checks that need fields of their own (so a delay's ``poll.check`` cannot name them).
CHECKS_WITH_REQUIRED_FIELDS = frozenset({"command", "file_exists", "label_present"})

GateChecks = Annotated[
    list[GateCheck],
    Field(min_length=1),
    count_items(MAX_GATE_CONDITIONS, "MAX_GATE_CONDITIONS", "gate conditions"),
]


AnyCondition.model_rebuild()
AllCondition.model_rebuild()
