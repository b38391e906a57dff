"""Hostile or mistaken arguments to `squadron`: a usage error naming the value, never a traceback."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

import squadron
from squadron.cli import main
from squadron.config.loader import SYMLINK_PROBLEM

REFERENCE = Path(__file__).resolve().parents[2] / ".squadron"


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    status = main(list(argv), out=out)
    return status, out.getvalue()


USAGE_ERRORS = [
    (["local", "--port", "99999"], "is not a port"),
    (["local", "--port", "-1"], "is not a port"),
    (["local", "--reconcile-seconds", "nan"], "greater than 0"),
    (["local", "--reconcile-seconds", "-3"], "greater than 0"),
    (["local", "--repo", "a/b/c"], "is not owner/name"),
    (["local", "--state-retention-days", "-1"], "is not a number of days"),
    (["local", "--state-retention-days", "1.5"], "is not a number of days"),
    (["local", "--state-retention-days", "99999"], "is not a number of days"),
    (["branch-protection", "plan", "--repo", "/"], "is not owner/name"),
    (["branch-protection", "plan", "--repo", "octo/.."], "is not owner/name"),
    (["branch-protection", "plan", "--repo", "octo/app", "--app-id", "1e9"], "is not a GitHub id"),
    (["branch-protection", "plan", "--repo", "octo/app", "--app-id", "-1"], "is not a GitHub id"),
    (["branch-protection", "plan", "--repo", "octo/app", "--app-id", "9" * 200], "is not a GitHub id"),
    (["status", "--repo", "octo"], "is not owner/name"),
    (["app", "create", "--webhook-url", "https://x.example", "--port", "65536"], "is not a port"),
]


@pytest.mark.parametrize(("argv", "words"), USAGE_ERRORS, ids=[" ".join(a)[:60] for a, _ in USAGE_ERRORS])
def test_bad_values_are_usage_errors(argv: list[str], words: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        run(*argv)
    assert caught.value.code == 2
    assert words in capsys.readouterr().err


def test_a_garbled_app_id_in_the_environment_breaks_no_other_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_APP_ID", "abc")
    assert run("validate", str(REFERENCE))[0] == 0
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_x")
    status, output = run("branch-protection", "plan", "--repo", "octo/app", "--path", str(REFERENCE))
    assert (status, output) == (1, "GITHUB_APP_ID: 'abc' is not a GitHub id (a whole number)\n")


def test_validate_says_what_is_not_a_directory(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    assert run("validate", str(tmp_path / "file")) == (1, f"{tmp_path / 'file'}: not a directory\n")


def test_validate_refuses_a_link_to_a_configuration_elsewhere(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / ".squadron")
    status, output = run("validate", str(tmp_path / ".squadron"))
    assert status == 1
    assert output.splitlines()[0] == f"{tmp_path / '.squadron'}: {SYMLINK_PROBLEM}"


def test_schema_into_a_place_that_cannot_hold_it(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    status, output = run("schema", "--out", str(tmp_path / "file" / "schemas"))
    assert status == 1 and output.startswith(
        f"{tmp_path / 'file' / 'schemas'}: cannot write the schemas there"
    )


def test_app_create_refuses_a_wait_that_is_not_a_number_of_minutes() -> None:
    status, output = run("app", "create", "--webhook-url", "https://x.example", "--timeout", "nan")
    assert status == 1 and "--timeout nan: minutes to wait, more than 0" in output


def test_a_deployment_refuses_an_absurd_app_id(tmp_path: Path) -> None:
    status, output = run("configure", "--file", str(tmp_path / "c.json"), "--github-app-id", "9" * 40)
    assert status == 1 and "github_app_id" in output


def test_the_version_is_printed_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        run("--version")
    assert caught.value.code == 0
    assert capsys.readouterr().out == f"squadron {squadron.__version__}\n"


NOT_CONFIGURATION = [
    ("an empty directory", {}),
    ("a repository's root, not its .squadron", {"README.md": "# app\n", "src/app.py": "print(1)\n"}),
]


@pytest.mark.parametrize(
    "files", [files for _, files in NOT_CONFIGURATION], ids=[name for name, _ in NOT_CONFIGURATION]
)
def test_validate_refuses_a_directory_with_no_configuration(tmp_path: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    status, output = run("validate", str(tmp_path))
    assert status == 1
    assert output.startswith(f"{tmp_path}: no Squadron configuration here (no config.yaml")


def test_validate_accepts_a_directory_with_only_a_config_file(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text((REFERENCE / "config.yaml").read_text())
    status, output = run("validate", str(tmp_path))
    assert (status, output.splitlines()[0]) == (0, f"{tmp_path}: OK")
