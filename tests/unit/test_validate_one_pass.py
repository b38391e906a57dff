"""`squadron validate` tells every problem in one pass (issue 33, item 5): a file's schema
problems do not hide its cross-references (an unknown role, a missing agent definition, a human
group not defined), and a tab that indents a line is named at its line and column."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from squadron.cli import main

FLOWS_OK = "version: 1\ndefault:\n  required_reviews:\n    - role: agent:pr-review\n"

CASES = [
    (
        "a schema problem and two dangling references in config.yaml",
        {
            "config.yaml": (
                "roles:\n"
                "  pm: {kind: pm}\n"
                "  feat-dev: {kind: dev, lifecycle: forever, agent: nosuch}\n"
                "labels:\n"
                "  bug: {role: nosuch-role}\n"
            )
        },
        [
            "config.yaml:3: roles.feat-dev.agent: no agent definition 'nosuch' (agents/nosuch.md)",
            "config.yaml:3: roles.feat-dev.lifecycle: Input should be 'persistent' or 'ephemeral' (got 'forever')",
            "config.yaml:5: labels.bug.role: unknown role 'nosuch-role'",
        ],
    ),
    (
        "a schema problem and an undefined human group in config.yaml",
        {
            "config.yaml": (
                "roles:\n  pm: {kind: pm}\n  feat-dev: {kind: dev}\ndefault_model: 12\n"
                "escalation:\n  notify: [human_group:oncall]\n"
            )
        },
        [
            "config.yaml:4: default_model: Input should be a valid string",
            "config.yaml:6: escalation.notify.0: unknown human group 'oncall'",
        ],
    ),
    (
        "a schema problem and an unknown reviewer in the approval flows",
        {
            "workflows/approval-flows.yaml": (
                "version: 1\ndefault:\n  required_reviews:\n    - role: agent:sec-review\n"
                "  merge_policy:\n    method: rebase-and-pray\n"
            )
        },
        [
            "workflows/approval-flows.yaml:4: default.required_reviews.0.role: unknown role 'sec-review'",
            "workflows/approval-flows.yaml:6: default.merge_policy.method: Input should be",
        ],
    ),
    (
        "a role whose kind is wrong is not also counted missing",
        {"config.yaml": "roles:\n  pm: {kind: boss}\n  feat-dev: {kind: dev}\n"},
        ["config.yaml:2: roles.pm.kind: Input should be 'pm', 'dev' or 'review' (got 'boss')"],
    ),
    (
        "a tab indenting a line of config.yaml",
        {"config.yaml": "project:\n  name: app\nroles:\n  pm:\n\tkind: pm\n"},
        ["config.yaml:5:1: a tab indents this line: YAML indents with spaces only"],
    ),
    (
        "a tab after spaces",
        {"config.yaml": "roles:\n  pm:\n    kind: pm\n  feat-dev:\n  \tkind: dev\n"},
        ["config.yaml:5:3: a tab indents this line"],
    ),
    (
        "a tab in an agent definition's front matter (lines of the whole file)",
        {"agents/helper.md": "---\nname: helper\ntools:\n\t- read\n---\nYou help.\n"},
        ["agents/helper.md:4:1: a tab indents this line"],
    ),
    (
        "a tab inside a value is no problem; a syntax error elsewhere still has its column",
        {"config.yaml": 'project:\n  name: "a\tb"\nroles: [pm\n'},
        ["config.yaml:4:1: YAML syntax error"],
    ),
]


@pytest.mark.parametrize(("files", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_validate_reports_every_problem_in_one_pass(
    tmp_path: Path, files: dict[str, str], expected: list[str]
) -> None:
    root = tmp_path / ".squadron"
    for name, text in {"workflows/approval-flows.yaml": FLOWS_OK, **files}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    out = io.StringIO()
    status = main(["validate", str(root)], out=out)
    lines = out.getvalue().splitlines()
    assert status == 1
    for want in expected:
        assert any(line.startswith(f"{root}/{want}") for line in lines), (want, lines)
    problems = len(lines) - 1
    assert lines[-1] == f"{problems} problem{'s' if problems != 1 else ''} in {root}"
    assert problems == len(expected), lines
