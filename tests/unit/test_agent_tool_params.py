"""What a model (or whoever injected its prompt) may pass to a framework tool: refused precisely.

The Copilot SDK validates every tool call's arguments with these models before the tool
runs, and answers the model with the validation error: so a hostile argument reaches
neither GitHub nor git.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from squadron.agent.tools import (
    AssignIssue,
    Comment,
    CreateIssue,
    GitPush,
    LabelIssue,
    OpenPr,
    ReadIssue,
    RegisterBlockerParams,
    ReportBlocked,
)

REFUSED: list[tuple[str, type[BaseModel], dict[str, Any], str]] = [
    ("a boolean issue", ReadIssue, {"number": True}, "Input should be a valid integer"),
    ("a float issue", ReadIssue, {"number": 3.0}, "Input should be a valid integer"),
    ("a string issue", Comment, {"body": "hi", "number": "38"}, "Input should be a valid integer"),
    ("issue zero", ReportBlocked, {"blocker_issue": 0, "reason": "x"}, "greater than 0"),
    ("a negative issue", RegisterBlockerParams, {"issue": -3, "blocked_by": 4}, "greater than 0"),
    (
        "an issue past 32 bits",
        LabelIssue,
        {"number": 2**31, "labels": ["bug"]},
        "less than or equal to 2147483647",
    ),
    ("a 5000-digit issue", ReadIssue, {"number": 10**5000 // 10**4700}, "less than or equal to 2147483647"),
    ("a NUL in a commit message", GitPush, {"message": "fix\x00--exec=sh"}, "NUL character"),
    (
        "a lone surrogate in a comment",
        Comment,
        {"body": "hi \ud800"},
        "unable to parse raw data as a unicode string",
    ),
    (
        "a lone surrogate in a label",
        CreateIssue,
        {"title": "t", "body": "b", "labels": ["\udfff"]},
        "unicode string",
    ),
    ("a label too long", LabelIssue, {"number": 1, "labels": ["x" * 51]}, "at most 50 characters"),
    (
        "a role that is no name",
        AssignIssue,
        {"number": 1, "role": "feat-dev; rm -rf /"},
        "should match pattern",
    ),
    ("a base branch of a megabyte", OpenPr, {"title": "t", "body": "b", "base": "x" * 10**6}, "at most 255"),
    ("an extra argument", ReadIssue, {"number": 1, "token": "x"}, "Extra inputs are not permitted"),
]


@pytest.mark.parametrize(
    ("model", "arguments", "words"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED]
)
def test_hostile_tool_arguments_are_refused(
    model: type[BaseModel], arguments: dict[str, Any], words: str
) -> None:
    with pytest.raises(ValidationError, match=words.replace("(", r"\(")):
        model.model_validate(arguments)
    with pytest.raises(ValidationError):  # as JSON, as a model's tool call arrives
        model.model_validate_json(_json(arguments))


def _json(arguments: dict[str, Any]) -> str:
    import json  # noqa: PLC0415

    return json.dumps(arguments)


def test_ordinary_arguments_still_pass() -> None:
    assert LabelIssue.model_validate({"number": 38, "labels": ["bug", "security"]}).number == 38
    assert AssignIssue.model_validate_json('{"number": 38, "role": "feat-dev"}').role == "feat-dev"
    assert OpenPr.model_validate({"title": "Export", "body": "Closes #38", "base": "release/2.x"}).base
    assert Comment.model_validate({"body": "Émoji 😀 and a tab\tare text"}).number is None
