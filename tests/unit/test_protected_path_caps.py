"""Protected paths against a pull request's changed files: capped, linear, and failing closed.

A pull request can change thousands of files with names of any length; GitHub lists at
most 3,000 of them. Past MAX_CHANGED_FILES files, or with a path longer than
MAX_CHANGED_PATH_LENGTH, the gate does not match: every protected path applies, so the
reviews and humans they require decide — a hidden file cannot slip through.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from squadron.config import load_directory
from squadron.config.parse import parse_files
from squadron.domain.approval import effective_flow, unmatched_files
from squadron.domain.repo_config.limits import (
    MAX_CHANGED_FILES,
    MAX_CHANGED_PATH_LENGTH,
    MAX_MATCH_WORK,
    MAX_PATH_GLOBS,
)
from squadron.domain.repo_config.models import ApprovalFlowsFile
from tests.support.bounded import run_bounded
from tests.support.recorded_github import RecordedGitHub, gate_over

ROOT = Path(__file__).resolve().parents[2]
FLOWS = load_directory(ROOT / ".squadron").approval_flows  # main protects infra/** and more
ALL_ON_MAIN = [
    "agent:pr-review",
    "human_group:maintainers",
    "agent:security-review",
    "human_group:infra-owners",
]


def _roles(files: list[str], count: int | None = None) -> list[str]:
    return [r.role for r in effective_flow(FLOWS, "main", files, changed_count=count).flow.required_reviews]


@pytest.mark.parametrize(
    ("files", "count", "reason"),
    [
        ([f"docs/{i}.md" for i in range(MAX_CHANGED_FILES + 1)], None, "1001 changed files, over the 1000"),
        (["docs/a.md"], 5000, "5000 changed files, over the 1000"),
        (["docs/a.md"], 2, "2 changed files but 1 listed"),
        (["docs/" + "a" * MAX_CHANGED_PATH_LENGTH], None, "a changed path of 1029 characters"),
    ],
    ids=["too-many-listed", "too-many-counted", "listed-fewer-than-counted", "path-too-long"],
)
def test_past_a_cap_every_protected_path_applies(files: list[str], count: int | None, reason: str) -> None:
    effective = effective_flow(FLOWS, "main", files, changed_count=count)
    assert [r.role for r in effective.flow.required_reviews] == ALL_ON_MAIN
    assert effective.require_human
    assert effective.added_by and all(added.startswith(reason) for added in effective.added_by)


def test_within_the_caps_only_what_matches_applies() -> None:
    files = [f"docs/{i}.md" for i in range(MAX_CHANGED_FILES)]
    assert unmatched_files(files, MAX_CHANGED_FILES) is None
    assert _roles(files, MAX_CHANGED_FILES) == ALL_ON_MAIN[:2]
    assert _roles([*files[:-1], "infra/stack.py"]) == ALL_ON_MAIN


def _hostile_flows() -> ApprovalFlowsFile:
    """The most globs a file may hold, each of a slow shape, matching nothing below."""
    globs = [f"**/{'*a' * 20}{i}/**" for i in range(MAX_PATH_GLOBS)]
    return ApprovalFlowsFile.model_validate(
        {"default": {"protected_paths": [{"paths": globs, "require_human": True}]}}
    )


def _match(files: list[str]) -> tuple[list[str], list[str]]:
    effective = effective_flow(_hostile_flows(), "main", files)
    return list(effective.added_by), [r.role for r in effective.flow.required_reviews]


def _long_paths(count: int) -> list[str]:
    return [("a/" * 512)[: MAX_CHANGED_PATH_LENGTH - 4] + f"{i:04}" for i in range(count)]


#: CPU seconds the bounded matching stays under. The work just within MAX_MATCH_WORK takes about
#: 0.45 s on a quiet machine; the bound is ten times that, as CPU time inflates when both cores are
#: shared, and still a fifth of what matching the largest pull request would cost without the
#: budget (51 times the work, about 23 s).
CPU_BOUND = 5.0


def test_the_most_matching_the_gate_does_stays_within_a_cpu_bound() -> None:
    files = _long_paths(MAX_MATCH_WORK // (MAX_PATH_GLOBS * MAX_CHANGED_PATH_LENGTH))  # just within
    outcome = run_bounded(_match, files, memory_mib=256)
    assert outcome.how == "returned", outcome.value
    assert outcome.value == ([], ["agent:pr-review"])  # matched: nothing protected was touched
    assert outcome.cpu_seconds < CPU_BOUND, outcome


def test_past_the_matching_budget_the_pull_request_touches_everything_at_once() -> None:
    outcome = run_bounded(_match, _long_paths(MAX_CHANGED_FILES), memory_mib=256)
    assert outcome.how == "returned", outcome.value
    (added,), roles = outcome.value
    assert roles == ["agent:pr-review"]  # the flow adds only a human: require_human
    assert added.startswith("102400000 path characters x globs to match, over 2000000 (MAX_MATCH_WORK)")
    assert outcome.cpu_seconds < CPU_BOUND, outcome


CONFIG = parse_files(
    {
        "config.yaml": "version: 1\nhuman_groups:\n  owners: {members: [octo-owner]}\n",
        "workflows/approval-flows.yaml": (
            "version: 1\ndefault:\n  merge_policy: {auto_merge: true}\n"
            "  protected_paths:\n    - {paths: ['.github/**'], required_reviews: [{role: 'human_group:owners'}]}\n"
        ),
    }
)


def test_the_gate_does_not_even_list_a_pull_request_over_the_cap() -> None:
    """A PR of 5,000 files (GitHub would list only 3,000): one read of the PR, no 30 pages of files."""
    github = RecordedGitHub(changed_files=5000, files=["README.md"])
    outcome = gate_over(github, CONFIG).evaluate(77, "octo/repo", 101, "feat-dev")
    assert "pulls/list-files" not in github.reads
    assert outcome.result is not None and not outcome.merged
    assert "waiting on owners" in outcome.result.reasons
