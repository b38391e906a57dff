"""Settings from the CDK context: defaults, conversions and clear errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_logs as logs

from infra.app import build, unsaved_context
from infra.settings import SettingsError, SquadronSettings
from tests.infra.synth import REPO_ROOT

pytestmark = pytest.mark.infra


def test_defaults() -> None:
    settings = SquadronSettings.from_mapping({})
    assert settings.model_dump() == {
        "stage": "dev",
        "account": None,
        "region": None,
        "github_app_id": "0",
        "github_app_slug": "squadron",
        "alarm_email": None,
        "events_max_receive_count": 5,
        "webhook_max_body_bytes": 2_097_152,
        "log_retention_days": 30,
        "log_level": "INFO",
        "api_throttle_rate_limit": 50.0,
        "api_throttle_burst_limit": 100,
        "router_max_concurrency": 5,
        "history_days": 120,
        "agent_egress": "public",
        "agent_allowed_domains": (),
        "state_retention_days": 7,
        "state_backups": False,
    }
    assert settings.log_retention == logs.RetentionDays.ONE_MONTH


def test_command_line_strings_and_json_numbers_are_converted() -> None:
    settings = SquadronSettings.from_mapping(
        {"events_max_receive_count": "9", "github_app_id": 4242, "alarm_email": "", "region": "eu-west-1"}
    )
    assert settings.events_max_receive_count == 9
    assert settings.github_app_id == "4242"
    assert settings.alarm_email is None
    assert settings.region == "eu-west-1"
    assert SquadronSettings.from_mapping(
        {"agent_allowed_domains": " pypi.org, *.npmjs.org,,"}
    ).agent_allowed_domains == ("pypi.org", "*.npmjs.org")


BAD_CONTEXT = [
    ("stage-uppercase", {"stage": "Prod"}, "stage"),
    ("app-id-not-numeric", {"github_app_id": "my-app"}, "github_app_id"),
    ("receive-count-zero", {"events_max_receive_count": "0"}, "events_max_receive_count"),
    ("receive-count-not-a-number", {"events_max_receive_count": "five"}, "events_max_receive_count"),
    ("body-over-lambda-limit", {"webhook_max_body_bytes": 10_000_000}, "webhook_max_body_bytes"),
    ("retention-not-allowed", {"log_retention_days": 42}, "log_retention_days"),
    ("bad-email", {"alarm_email": "ops-at-example"}, "alarm_email"),
    ("negative-rate", {"api_throttle_rate_limit": "-1"}, "api_throttle_rate_limit"),
    ("bad-account", {"account": "12345"}, "account"),
    ("unknown-log-level", {"log_level": "VERBOSE"}, "log_level"),
    ("history-zero-days", {"history_days": "0"}, "history_days"),
    ("history-not-a-number", {"history_days": "forever"}, "history_days"),
    ("negative-state-retention", {"state_retention_days": "-1"}, "state_retention_days"),
    ("state-retention-not-a-number", {"state_retention_days": "a week"}, "state_retention_days"),
    ("allow-every-name", {"agent_allowed_domains": "pypi.org,*"}, "agent_allowed_domains"),
    ("allow-a-url", {"agent_allowed_domains": "https://pypi.org/simple"}, "agent_allowed_domains"),
    ("allow-a-top-level-domain", {"agent_allowed_domains": "*.com"}, "agent_allowed_domains"),
    ("allow-uppercase", {"agent_allowed_domains": "PyPI.org"}, "agent_allowed_domains"),
]


@pytest.mark.parametrize(
    ("context", "key"),
    [(context, key) for _, context, key in BAD_CONTEXT],
    ids=[case_id for case_id, _, _ in BAD_CONTEXT],
)
def test_bad_context_value_is_a_clear_error(context: dict[str, object], key: str) -> None:
    with pytest.raises(SettingsError) as caught:
        SquadronSettings.from_mapping(context)
    (error,) = caught.value.errors
    assert error.startswith(f"context key '{key}': ")
    assert repr(next(iter(context.values()))) in error
    assert "Fix it with `squadron configure` (it writes cdk.context.json)" in str(caught.value)


def test_every_bad_value_is_reported_at_once() -> None:
    with pytest.raises(SettingsError) as caught:
        SquadronSettings.from_mapping({"stage": "", "log_retention_days": 2})
    assert len(caught.value.errors) == 2


def test_build_reads_settings_from_the_app_context() -> None:
    app = cdk.App(context={"events_max_receive_count": "-3"})
    with pytest.raises(SettingsError, match="events_max_receive_count"):
        build(app)
    assert app.node.children == []  # nothing was built from the bad context


def test_cdk_app_entry_point_exits_with_the_message() -> None:
    # What `cdk synth -c log_retention_days=42` runs: the error is on stderr, no traceback.
    environment = {**os.environ, "CDK_CONTEXT_JSON": json.dumps({"log_retention_days": 42})}
    result = subprocess.run(
        [sys.executable, "-m", "infra.app"],
        cwd=REPO_ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1
    assert "context key 'log_retention_days'" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_deployment_value_given_only_with_dash_c_is_refused(tmp_path: Path) -> None:
    """`cdk deploy -c github_app_id=5`: CDK keeps nothing of it, so the next plain deploy would
    silently deploy without the App; the app refuses it and says how to keep it."""
    (tmp_path / "cdk.context.json").write_text(json.dumps({"stage": "prod"}))
    app = cdk.App(context={"stage": "prod", "github_app_id": "5", "@aws-cdk/core:checkSecretUsage": True})
    assert unsaved_context(app, tmp_path) == (
        "-c github_app_id=5: values given with -c are not kept, so the next plain `cdk deploy` would silently "
        "deploy without them (revert the App's id, or deploy another stage). Keep them in cdk.context.json: "
        "`squadron configure --set github_app_id=5`, then run the command without -c"
    )
    kept = cdk.App(context={"stage": "prod", "@aws-cdk/core:checkSecretUsage": True})
    assert unsaved_context(kept, tmp_path) is None


def test_cdk_app_entry_point_refuses_unsaved_values(tmp_path: Path) -> None:
    # What `cdk deploy -c stage=test` runs in a checkout whose cdk.context.json says prod.
    (tmp_path / "cdk.context.json").write_text(json.dumps({"stage": "prod"}))
    environment = {
        **os.environ,
        "CDK_CONTEXT_JSON": json.dumps({"stage": "test"}),
        "PYTHONPATH": str(REPO_ROOT),
        "CDK_OUTDIR": str(tmp_path / "cdk.out"),
    }
    result = subprocess.run(
        [sys.executable, "-m", "infra.app"],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    assert "squadron infra: -c stage=test: values given with -c are not kept" in result.stderr
    assert "Traceback" not in result.stderr
