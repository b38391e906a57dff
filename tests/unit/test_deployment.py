"""Deployment values kept where CDK keeps them: `squadron configure` and cdk.context.json."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from squadron.cli import main
from squadron.deployment import (
    CONTEXT_FILE,
    STAGES_KEY,
    DeploymentSettings,
    SettingsError,
    configure,
    saved_values,
    unsaved_values,
)


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(argv), out=out), out.getvalue()


def test_configure_keeps_the_values_and_every_other_key_of_the_file(tmp_path: Path) -> None:
    path = tmp_path / "cdk.context.json"
    # CDK keeps its own lookups in the same file: they survive.
    path.write_text(json.dumps({"availability-zones:account=1:region=eu-west-1": ["eu-west-1a"]}))
    configure(path, {"stage": "prod", "alarm_email": "ops@example.com"})
    settings = configure(
        path, {"github_app_id": "123456", "github_app_slug": "acme-bot", "alarm_email": None}
    )
    assert (settings.stage, settings.github_app_id, settings.github_app_slug, settings.alarm_email) == (
        "prod",
        "123456",
        "acme-bot",
        None,
    )
    assert json.loads(path.read_text()) == {
        "availability-zones:account=1:region=eu-west-1": ["eu-west-1a"],
        "stage": "prod",
        "github_app_id": "123456",
        "github_app_slug": "acme-bot",
    }


BAD_CHANGES = [
    # (case id, the change, what the error names): nothing is written when any value is bad
    ("app-id-not-a-number", {"github_app_id": "abc"}, "context key 'github_app_id'"),
    ("slug-is-a-login", {"github_app_slug": "acme-bot[bot]"}, "context key 'github_app_slug'"),
    ("unknown-key", {"github_app": "1"}, "context key 'github_app': not a Squadron setting"),
    ("router-below-sqs-minimum", {"router_max_concurrency": "1"}, "context key 'router_max_concurrency'"),
]


@pytest.mark.parametrize(
    ("change", "named"), [row[1:] for row in BAD_CHANGES], ids=[row[0] for row in BAD_CHANGES]
)
def test_a_bad_value_is_named_and_nothing_is_written(
    tmp_path: Path, change: dict[str, object], named: str
) -> None:
    path = tmp_path / "cdk.context.json"
    configure(path, {"stage": "prod"})
    before = path.read_text()
    with pytest.raises(SettingsError, match=named):
        configure(path, change)
    assert path.read_text() == before


def test_the_command_prints_each_value_and_where_it_comes_from(tmp_path: Path) -> None:
    path = tmp_path / "cdk.context.json"
    status, said = run(
        "configure",
        "--file",
        str(path),
        "--stage",
        "prod",
        "--github-app-id",
        "77",
        "--set",
        "log_retention_days=90",
    )
    assert status == 0, said
    lines = said.splitlines()
    assert "stage                     prod" in lines
    assert "github_app_id             77" in lines
    assert "log_retention_days        90" in lines
    assert "github_app_slug           squadron  (default)" in lines
    assert lines[-1] == f"kept in {path}: `make deploy` deploys Squadron-prod with these values"
    assert json.loads(path.read_text()) == {
        "stage": "prod",
        "github_app_id": "77",
        "log_retention_days": "90",
    }


def test_check_refuses_a_deploy_whose_stage_was_never_chosen(tmp_path: Path) -> None:
    path = tmp_path / "cdk.context.json"
    status, said = run("configure", "--check", "--file", str(path))
    assert status == 1
    assert said.startswith(f"{path} names no stage: choose one with `squadron configure --stage NAME`")
    run("configure", "--file", str(path), "--stage", "prod")
    status, said = run("configure", "--check", "--file", str(path))
    assert status == 0 and "deploys Squadron-prod" in said
    assert "github_app_id is 0: the stack waits for its App" in said


def test_check_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "cdk.context.json"
    status, said = run("configure", "--check", "--file", str(path), "--stage", "prod")
    assert (status, said) == (1, "--check changes nothing: run without it to set values\n")
    assert not path.exists()


def test_values_given_only_on_the_command_line_are_found(tmp_path: Path) -> None:
    (tmp_path / "cdk.json").write_text(
        json.dumps({"app": "x", "context": {"log_level": "DEBUG", "@aws-cdk/x": True}})
    )
    (tmp_path / "cdk.context.json").write_text(json.dumps({"stage": "prod", "log_retention_days": 90}))
    saved = saved_values(tmp_path)
    assert saved == {"log_level": "DEBUG", "stage": "prod", "log_retention_days": 90}
    effective = {
        "stage": "prod",  # from the file
        "log_retention_days": "90",  # the file's number, as the CLI may pass it
        "log_level": "DEBUG",  # from cdk.json
        "github_app_id": "5",  # -c github_app_id=5
        "@aws-cdk/x": True,  # a feature flag, not a deployment value
    }
    assert unsaved_values(effective, saved) == {"github_app_id": "5"}
    assert unsaved_values({**effective, "stage": "test"}, saved) == {"stage": "test", "github_app_id": "5"}


def test_each_stage_keeps_its_own_values_so_switching_never_deploys_another_stages_app(
    tmp_path: Path,
) -> None:
    path = tmp_path / CONTEXT_FILE
    configure(
        path, {"stage": "prod", "github_app_id": "111", "github_app_slug": "acme-prod", "region": "eu-west-1"}
    )
    staging = configure(path, {"stage": "staging"})
    # What every cdk command reads now is staging's: nothing of prod's App, account or region.
    assert (staging.github_app_id, staging.github_app_slug, staging.region) == ("0", "squadron", None)
    on_disk = DeploymentSettings.from_mapping(saved_values(tmp_path))
    assert (on_disk.stack_name, on_disk.github_app_id) == ("Squadron-staging", "0")
    configure(path, {"github_app_id": "222", "github_app_slug": "acme-staging"})
    prod = configure(path, {"stage": "prod"})
    assert (prod.github_app_id, prod.github_app_slug, prod.region) == ("111", "acme-prod", "eu-west-1")
    back = configure(path, {"stage": "staging", "alarm_email": "ops@example.com"})
    assert (back.github_app_id, back.alarm_email) == ("222", "ops@example.com")
    assert json.loads(path.read_text())[STAGES_KEY]["prod"]["github_app_id"] == "111"


def test_a_bad_stage_switches_nothing(tmp_path: Path) -> None:
    path = tmp_path / CONTEXT_FILE
    configure(path, {"stage": "prod", "github_app_id": "111"})
    before = path.read_text()
    with pytest.raises(SettingsError):
        configure(path, {"stage": "Not A Stage"})
    assert path.read_text() == before
