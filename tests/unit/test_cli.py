"""The `squadron` command: validate, schema, local."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest

from squadron.cli import SUBCOMMANDS, main
from squadron.config.schema import SCHEMAS
from tests.support.github_fake import app_private_key

REFERENCE = Path(__file__).resolve().parents[2] / ".squadron"


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    status = main(list(argv), out=out)
    return status, out.getvalue()


@pytest.fixture
def squadron_copy(tmp_path: Path) -> Path:
    target = tmp_path / ".squadron"
    shutil.copytree(REFERENCE, target)
    return target


def test_validate_reference_prints_a_summary() -> None:
    status, output = run("validate", str(REFERENCE))

    assert status == 0
    assert output.splitlines()[0] == f"{REFERENCE}: OK"
    assert (
        "roles: 6 (pm:pm, feat-dev:dev, bug-fix:dev, pr-review:review, security-review:review, retrospective:dev)"
        in output
    )
    assert "approval flows: default + 1 branch rule (main)" in output


def test_validate_defaults_to_dot_squadron(squadron_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(squadron_copy.parent)

    status, output = run("validate")

    assert status == 0 and output.startswith(".squadron: OK")


def test_validate_prints_every_problem_one_per_line(
    squadron_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = squadron_copy / "config.yaml"
    config.write_text(config.read_text().replace("lifecycle: ephemeral", "lifecycle: forever"))
    flows = squadron_copy / "workflows" / "approval-flows.yaml"
    flows.write_text(flows.read_text().replace("agent:security-review", "agent:sec-review", 1))
    monkeypatch.chdir(squadron_copy.parent)

    status, output = run("validate", ".squadron")

    lines = output.splitlines()
    assert status == 1
    assert lines[-1] == "2 problems in .squadron"
    assert lines[0].startswith(".squadron/config.yaml:") and "roles.pm.lifecycle: Input should be" in lines[0]
    assert lines[1].startswith(".squadron/workflows/approval-flows.yaml:")
    assert "unknown role 'sec-review'" in lines[1]


def test_validate_missing_directory(tmp_path: Path) -> None:
    status, output = run("validate", str(tmp_path / "nope"))

    assert status == 1 and "no such directory" in output


def test_validate_with_only_a_config_file_uses_defaults_for_the_rest(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("dashboard: false\n")
    status, output = run("validate", str(tmp_path))

    assert status == 0
    assert "documented defaults used for: workflows/approval-flows.yaml" in output
    assert "6 built-in" in output


OWN_FEATURE_PIPELINE = """
pipelines:
  feature-development:
    trigger: {event: issues.assigned}
    stages:
      - {id: build, type: agent, agent: feat-dev}
"""


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (
            "dashboard: false\n",
            "  orchestration: pipelines (built-in pipelines run: bug-development, feature-development; "
            "docs/pipelines.md)",
        ),
        (
            "orchestration: pipelines\n" + OWN_FEATURE_PIPELINE,
            "  orchestration: pipelines (built-in pipelines run: bug-development; docs/pipelines.md)",
        ),
        (
            "orchestration: fixed\n" + OWN_FEATURE_PIPELINE,
            "  orchestration: fixed (the fixed routing starts every agent; only the pipelines above run)",
        ),
    ],
    ids=["default", "own-pipeline-overrides-a-built-in", "fixed"],
)
def test_validate_says_what_orchestrates_the_issues(tmp_path: Path, config: str, expected: str) -> None:
    (tmp_path / "config.yaml").write_text(config)

    status, output = run("validate", str(tmp_path))

    assert status == 0, output
    assert expected in output.splitlines()
    assert "being built" not in output


def test_schema_writes_every_schema(tmp_path: Path) -> None:
    status, output = run("schema", "--out", str(tmp_path / "schemas"))

    assert status == 0
    assert sorted(p.name for p in (tmp_path / "schemas").iterdir()) == sorted(SCHEMAS)
    assert output.count("wrote ") == len(SCHEMAS)


def test_local_needs_a_checkout(tmp_path: Path) -> None:
    status, output = run("local", "--root", str(tmp_path))

    assert status == 1
    assert "not a Squadron checkout" in output


def test_subcommands_are_a_table() -> None:
    assert [command.name for command in SUBCOMMANDS] == [
        "validate",
        "schema",
        "local",
        "configure",
        "doctor",
        "destroy",
        "status",
        "agent",
        "dlq",
        "events",
        "pipelines",
        "change-sets",
        "memory",
        "retro",
        "replay",
        "app",
        "branch-protection",
    ]


def test_unknown_subcommand_exits_with_usage() -> None:
    with pytest.raises(SystemExit) as caught:
        run("deploy")
    assert caught.value.code == 2


def test_local_refuses_incomplete_github_credentials_before_starting(tmp_path: Path) -> None:
    file = tmp_path / "github-app.yaml"
    file.write_text("app_id: 1\n")
    status, output = run("local", "--github-app", str(file))

    assert status == 1
    assert "SQUADRON_GITHUB_WEBHOOK_SECRET: Field required" in output
    assert "SQUADRON_GITHUB_PRIVATE_KEY_FILE: Field required" in output


def test_the_demo_needs_the_sandbox(tmp_path: Path) -> None:
    key = tmp_path / "app.pem"
    key.write_text(app_private_key()[0])
    file = tmp_path / "github-app.yaml"
    file.write_text(f"app_id: 1\nprivate_key_file: {key}\nwebhook_secret: s\n")
    status, output = run("local", "--demo", "--github-app", str(file))

    assert status == 1
    assert "--demo plays against the GitHub sandbox" in output
