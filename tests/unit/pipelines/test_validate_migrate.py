"""``squadron validate`` on approval flows (issue 30, item 3): it names the pipelines the flows are
equivalent to, ``--migrate`` prints them as YAML a team pastes under ``pipelines:`` (the pasted
file validates), a merge_pr is told the flow still applies, and a hostile approval-flows.yaml
is refused at its line before anything is translated."""

from __future__ import annotations

import io
import shutil
import textwrap
from pathlib import Path

import pytest
import yaml

from squadron.cli import main
from squadron.config import load_directory
from squadron.domain.pipelines.compile import MAX_DEFINITION_BYTES, compile_pipeline
from squadron.domain.repo_config.limits import (
    MAX_BRANCH_RULES,
    MAX_FILE_BYTES,
    MAX_PATH_GLOBS,
    MAX_YAML_DEPTH,
)
from tests.unit.pipelines.test_compile import QUEUE

REFERENCE = Path(__file__).resolve().parents[3] / ".squadron"


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    status = main(list(argv), out=out)
    return status, out.getvalue()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    target = tmp_path / ".squadron"
    shutil.copytree(REFERENCE, target)
    return target


def paste(repo: Path, printed: str) -> None:
    config = repo / "config.yaml"
    config.write_text(config.read_text() + "\n" + printed)


def test_validate_names_the_pipelines_the_flows_are_equivalent_to(repo: Path) -> None:
    status, output = run("validate", str(repo))

    assert status == 0
    assert (
        f"  info: {repo}/workflows/approval-flows.yaml is equivalent to the pipelines approval-default "
        "(1 stage), approval-main (5 stages), with 15 notes on what a gate does not say; "
        f"`squadron validate --migrate {repo}` prints them to paste under pipelines:"
    ) in output.splitlines()


def test_migrate_prints_yaml_that_validates_once_pasted(repo: Path) -> None:
    status, printed = run("validate", "--migrate", str(repo))
    assert status == 0
    flows_file = f"{repo}/workflows/approval-flows.yaml"
    comments = [line for line in printed.splitlines() if line.startswith("#")]
    # every note names its file and line: the group a gate does not check, the assignee it cannot make
    assert (
        f"#   {flows_file}:34:9: branch_rules.0.required_reviews.1.role: human_group:maintainers: "
        in "\n".join(comments)
    )
    assert any(
        line.startswith(f"#   {flows_file}:62:")
        and "assign octo-maintainer: no pipeline action assigns people" in line
        for line in comments
    )

    paste(repo, printed)
    status, output = run("validate", str(repo))

    assert status == 0, output
    pipelines = load_directory(repo).config.pipelines
    assert (
        set(yaml.safe_load(printed)["pipelines"]) == {"approval-default", "approval-main"} <= set(pipelines)
    )
    for name in ("approval-default", "approval-main"):
        compile_pipeline(name, pipelines, queue_url=QUEUE, repository_id=1, children={})
    # pasted once, the next --migrate names its pipelines unlike those now in the file
    status, again = run("validate", "--migrate", str(repo))
    assert status == 0 and set(yaml.safe_load(again)["pipelines"]).isdisjoint(
        {"approval-default", "approval-main"}
    )


def test_a_pipeline_that_merges_is_warned_that_the_flow_still_applies(repo: Path) -> None:
    paste(
        repo,
        textwrap.dedent(
            """\
            pipelines:
              ship:
                trigger: {event: pull_request.opened, conditions: {base_branch: main}}
                stages:
                  - id: merge
                    type: action
                    action: merge_pr
            """
        ),
    )
    lines = (repo / "config.yaml").read_text().splitlines()
    line = next(number for number, text in enumerate(lines, start=1) if "- id: merge" in text)

    status, output = run("validate", str(repo))

    assert status == 0
    warning = next(text for text in output.splitlines() if text.startswith("warning:"))
    assert warning.startswith(
        f"warning: {repo}/config.yaml:{line}:9: pipelines.ship.stages.0: merge_pr (the flow's method) asks the "
        "merge gate, which also applies the approval flow of 'main' (default + rule 'main'): both govern merging"
    )


def test_validate_says_which_built_ins_the_repository_overrides(repo: Path) -> None:
    paste(
        repo,
        "pipelines:\n  triage:\n    trigger: {event: issues.opened}\n    stages: [{id: s, type: delay, duration: 1m}]\n",
    )

    status, output = run("validate", str(repo))

    assert status == 0
    assert "  info: built-in default pipelines overridden by the repository's: triage" in output.splitlines()


# --- hostile approval-flows files -------------------------------------------------------------


def _deep(depth: int) -> str:
    return (
        "default:\n  required_reviews:\n    - role: agent:pr-review\n      x: "
        + "[" * depth
        + "]" * depth
        + "\n"
    )


HOSTILE = [
    (
        "unknown keys",
        "default:\n  required_reviews:\n    - role: agent:pr-review\n      approve_by: everyone\n  merge_now: true\n",
        [":4: default.required_reviews.0.approve_by: ", ":5: default.merge_now: "],
    ),
    ("nested past the YAML depth", _deep(MAX_YAML_DEPTH + 5), [":4: "]),
    ("over the file size", "# " + "x" * MAX_FILE_BYTES + "\ndefault: {}\n", [": is "]),
    (
        "an alias bomb",
        "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
        "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
        "e: [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n",
        [":"],
    ),
    ("a tab indenting", "default:\n\trequired_reviews: []\n", [":2:1: "]),
]


@pytest.mark.parametrize(("case", "text", "where"), HOSTILE, ids=[case[0] for case in HOSTILE])
def test_a_hostile_flows_file_is_refused_at_its_line_before_any_translation(
    repo: Path, case: str, text: str, where: list[str]
) -> None:
    (repo / "workflows" / "approval-flows.yaml").write_text(text)

    status, output = run("validate", "--migrate", str(repo))

    assert status == 1
    assert "pipelines:" not in output  # nothing translated from a file that does not load
    problems = [line for line in output.splitlines() if "approval-flows.yaml" in line]
    assert problems, output
    for fragment in where:
        assert any(f"{repo}/workflows/approval-flows.yaml{fragment}" in line for line in problems), output


@pytest.mark.parametrize("padding", [0, 60_000])
def test_the_largest_flows_file_gives_bounded_pipelines_that_validate(repo: Path, padding: int) -> None:
    """50 branch rules (MAX_BRANCH_RULES), 100 protected globs (MAX_PATH_GLOBS), 60 status checks
    each: what --migrate prints stays within every pipeline bound and Step Functions' size, and
    pasted into config.yaml (already ``padding`` bytes longer) keeps it within MAX_FILE_BYTES."""
    globs = ", ".join(f"'p{i}/**'" for i in range(MAX_PATH_GLOBS))
    checks = ", ".join(f"ci-{i}" for i in range(60))
    rules = "".join(
        f"  - {{pattern: b{i}, required_status_checks: [{checks}], required_reviews: [{{role: human_group:maintainers, min_approvals: 3}}]}}\n"
        for i in range(MAX_BRANCH_RULES)
    )
    (repo / "workflows" / "approval-flows.yaml").write_text(
        "default:\n  merge_policy: {auto_merge: true}\n  protected_paths:\n"
        f"    - paths: [{globs}]\n      require_human: true\n"
        f"branch_rules:\n{rules}"
    )
    (repo / "config.yaml").write_text((repo / "config.yaml").read_text() + "#" * padding + "\n")

    status, printed = run("validate", "--migrate", str(repo))
    assert status == 0, printed
    paste(repo, printed)
    status, output = run("validate", str(repo))

    assert status == 0, output
    assert len((repo / "config.yaml").read_bytes()) <= MAX_FILE_BYTES
    pipelines = load_directory(repo).config.pipelines
    left_out = [line for line in printed.splitlines() if "config.yaml would pass its" in line]
    assert len(pipelines) + len(left_out) == 20
    assert bool(left_out) == bool(padding)  # a config.yaml with less room takes fewer, each named
    for name in pipelines:
        compiled = compile_pipeline(name, pipelines, queue_url=QUEUE, repository_id=1, children={})
        assert len(compiled.text.encode()) <= MAX_DEFINITION_BYTES


def test_without_a_flows_file_migrate_prints_the_documented_default_flow(repo: Path) -> None:
    (repo / "workflows" / "approval-flows.yaml").unlink()

    status, printed = run("validate", "--migrate", str(repo))

    assert status == 0
    assert printed.startswith(
        "# The pipelines the documented default approval flow (no "
        f"{repo}/workflows/approval-flows.yaml) is equivalent to"
    )
    # a note about a documented default has no line to point at
    assert (
        f"#   {repo}/workflows/approval-flows.yaml: default.merge_policy.auto_merge: auto_merge is off"
        in printed
    )
    assert list(yaml.safe_load(printed)["pipelines"]) == ["approval-default"]
