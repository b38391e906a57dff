"""Operator commands read the stage and region `cdk deploy` deploys (issue 32 item 7): the stage and
region of the checkout's values as the CDK CLI reads them (cdk.json's context over
cdk.context.json over ~/.cdk.json), a stage not chosen now by its own kept values, else the
region the CDK CLI falls back to ($AWS_REGION before $AWS_DEFAULT_REGION, which boto3 alone
reads; then the profile's region in the shared files; then us-east-1). Each case asserts on the
stack and region a command would read; the adapter cases ask CloudFormation (moto) and show the
stack it was asked about."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path
from typing import Any

import pytest
from moto import mock_aws

from squadron.cli import build_parser, main
from squadron.deployment import STAGES_KEY, configure
from squadron.operator_cli import deployed_where

PROD = {"stage": "prod", "region": "eu-west-1", "github_app_id": "7"}
#: cdk.context.json after `squadron configure --stage staging --region us-west-2`, then `--stage prod ...`.
TWO_STAGES = {**PROD, STAGES_KEY: {"staging": {"region": "us-west-2", "github_app_id": "8"}}}
CONFIG = (
    "[default]\nregion = sa-east-1\n\n[profile work]\nregion = ap-south-1\n\n[profile bare]\noutput = json\n"
)
CREDENTIALS = "[default]\naws_access_key_id = x\n\n[work]\nregion = ca-central-1\n"

CASES: list[tuple[str, dict[str, Any], list[str], dict[str, str], tuple[str, str]]] = [
    # (id, files, argv after `status`, environment, (stack, region) read)
    ("fresh-clone-no-region-anywhere", {}, [], {}, ("Squadron-dev", "us-east-1")),
    ("the-checkout-s-stage-and-region", {"cdk.context.json": PROD}, [], {}, ("Squadron-prod", "eu-west-1")),
    (
        "its-region-over-the-environment-s",
        {"cdk.context.json": PROD},
        [],
        {"AWS_REGION": "ap-northeast-1", "AWS_DEFAULT_REGION": "us-west-1"},
        ("Squadron-prod", "eu-west-1"),
    ),
    (
        # cdk reads AWS_REGION first; boto3 (the commands' old default) read AWS_DEFAULT_REGION only.
        "environment-agnostic-aws-region-first",
        {"cdk.context.json": {"stage": "prod"}},
        [],
        {"AWS_REGION": "eu-central-1", "AWS_DEFAULT_REGION": "us-west-2"},
        ("Squadron-prod", "eu-central-1"),
    ),
    (
        "environment-agnostic-aws-default-region",
        {"cdk.context.json": {"stage": "prod"}},
        [],
        {"AWS_DEFAULT_REGION": "us-west-2"},
        ("Squadron-prod", "us-west-2"),
    ),
    (
        "the-profile-s-region-in-the-config-file",
        {".aws/config": CONFIG},
        [],
        {"AWS_PROFILE": "work"},
        ("Squadron-dev", "ap-south-1"),
    ),
    (
        "the-credentials-file-before-the-config-file",
        {".aws/config": CONFIG, ".aws/credentials": CREDENTIALS},
        [],
        {"AWS_PROFILE": "work"},
        ("Squadron-dev", "ca-central-1"),
    ),
    (
        "a-profile-without-region-falls-to-default-s",
        {".aws/config": CONFIG},
        [],
        {"AWS_PROFILE": "bare"},
        ("Squadron-dev", "sa-east-1"),
    ),
    (
        # The CDK CLI's context: cdk.json's "context" over cdk.context.json.
        "cdk-json-over-cdk-context-json",
        {"cdk.context.json": PROD, "cdk.json": {"context": {"region": "eu-north-1"}}},
        [],
        {},
        ("Squadron-prod", "eu-north-1"),
    ),
    (
        "the-user-s-cdk-json-under-the-project-s",
        {
            ".cdk.json": {"context": {"stage": "qa", "region": "eu-south-1"}},
            "cdk.context.json": {"stage": "prod"},
        },
        [],
        {},
        ("Squadron-prod", "eu-south-1"),
    ),
    (
        # Another stage's region is its own, kept aside, never the chosen stage's.
        "another-stage-by-its-own-values",
        {"cdk.context.json": TWO_STAGES},
        ["--stage", "staging"],
        {"AWS_REGION": "ap-northeast-1"},
        ("Squadron-staging", "us-west-2"),
    ),
    (
        "another-stage-named-by-its-stack",
        {"cdk.context.json": TWO_STAGES},
        ["--stack", "Squadron-staging"],
        {},
        ("Squadron-staging", "us-west-2"),
    ),
    (
        "a-stage-never-configured-is-where-cdk-would-deploy-it",
        {"cdk.context.json": TWO_STAGES},
        ["--stage", "test"],
        {"AWS_DEFAULT_REGION": "us-east-2"},
        ("Squadron-test", "us-east-2"),
    ),
    (
        "the-chosen-stage-named-explicitly",
        {"cdk.context.json": TWO_STAGES},
        ["--stage", "prod"],
        {"AWS_REGION": "ap-northeast-1"},
        ("Squadron-prod", "eu-west-1"),
    ),
    (
        "region-given",
        {"cdk.context.json": PROD},
        ["--region", "eu-west-3"],
        {},
        ("Squadron-prod", "eu-west-3"),
    ),
    (
        "a-stack-of-another-name",
        {"cdk.context.json": PROD},
        ["--stack", "Other"],
        {"AWS_DEFAULT_REGION": "us-west-1"},
        ("Other", "us-west-1"),
    ),
]


def _lay(root: Path, files: dict[str, Any]) -> tuple[Path, Path]:
    home, checkout = root / "home", root / "checkout"
    for directory in (home, checkout):
        directory.mkdir()
    for name, content in files.items():
        path = (home if name.startswith(".") else checkout) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return home, checkout


def _args(argv: list[str], checkout: Path) -> argparse.Namespace:
    return build_parser().parse_args(["status", *argv, "--file", str(checkout / "cdk.context.json")])


@pytest.mark.parametrize(
    ("files", "argv", "environ", "read"), [case[1:] for case in CASES], ids=[case[0] for case in CASES]
)
def test_an_operator_command_reads_the_stack_and_region_cdk_deploys(
    tmp_path: Path, files: dict[str, Any], argv: list[str], environ: dict[str, str], read: tuple[str, str]
) -> None:
    home, checkout = _lay(tmp_path, files)
    stack, region, _ = deployed_where(_args(argv, checkout), environ, home)
    assert (stack, region) == read


def test_switching_stages_with_configure_moves_what_operators_read(tmp_path: Path) -> None:
    """`squadron configure --stage` switches both `cdk deploy` and the operator commands at once;
    the stage put aside is still read in its own region."""
    home, checkout = _lay(tmp_path, {})
    context = checkout / "cdk.context.json"
    configure(context, {"stage": "prod", "region": "eu-west-1"})
    configure(context, {"stage": "staging", "region": "us-west-2"})
    read = {
        tuple(argv): deployed_where(_args(list(argv), checkout), {}, home)[:2]
        for argv in ((), ("--stage", "prod"), ("--stage", "staging"))
    }
    assert read == {
        (): ("Squadron-staging", "us-west-2"),
        ("--stage", "prod"): ("Squadron-prod", "eu-west-1"),
        ("--stage", "staging"): ("Squadron-staging", "us-west-2"),
    }


COMMANDS = [
    ["status"],
    ["dlq", "list"],
    ["replay", "72d3162e-cc78-11e3-81ab-4c9367dc0958"],
    ["events", "tail", "--once"],
    ["agent", "show", "1-42-feat-dev"],
    ["memory", "list", "--repo", "octo/app"],
    ["retro", "start", "--repo", "octo/app"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(c[:2]) for c in COMMANDS])
def test_every_operator_command_asks_the_deployed_stage_s_region(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    """Through the real adapter, on moto: each command asks CloudFormation for the checkout's stage
    in its own region, whatever boto3's default region says, and says how it chose them."""
    home, checkout = _lay(tmp_path, {"cdk.context.json": TWO_STAGES})
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")  # boto3's default: not where prod is
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.chdir(checkout)
    out = io.StringIO()
    with mock_aws():
        status = main(command, out=out)
    said = out.getvalue()
    assert status == 3, said
    assert "no stack Squadron-prod in eu-west-1 (stack from " in said, said
    assert f"region from {checkout / 'cdk.context.json'}" in said or "region from cdk.context.json" in said, (
        said
    )
