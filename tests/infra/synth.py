"""Helpers of the infra tests: the context they synthesize with and the synthesized result."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk import assertions
from constructs import Construct

from infra.stack import SquadronStack

REPO_ROOT = Path(__file__).resolve().parents[2]

# Non-default values, so the tests prove that each setting reaches its resource.
SETTINGS_CONTEXT: dict[str, object] = {
    "stage": "ci",
    "github_app_id": "123456",
    "github_app_slug": "squadron-ci",
    "alarm_email": "ops@example.com",
    "events_max_receive_count": "7",  # strings, as `cdk synth -c KEY=VALUE` passes them
    "webhook_max_body_bytes": "1048576",
    "log_retention_days": 14,
    "api_throttle_rate_limit": "25",
    "api_throttle_burst_limit": 40,
    "router_max_concurrency": "4",
    "history_days": "45",
    "state_retention_days": "3",
    "agent_allowed_domains": "pypi.org, files.pythonhosted.org,*.npmjs.org",
}


def cdk_json_context() -> dict[str, Any]:
    """The feature flags of cdk.json, so tests synthesize what `cdk synth` does."""
    context: dict[str, Any] = json.loads((REPO_ROOT / "cdk.json").read_text())["context"]
    return context


@dataclass(frozen=True)
class Synthesized:
    stack: SquadronStack
    template: assertions.Template
    template_json: Mapping[str, Any]
    template_path: Path
    outdir: Path

    def logical_id(self, construct: Construct) -> str:
        """The CloudFormation logical id of an L2 construct's main resource."""
        default_child = construct.node.default_child
        assert isinstance(default_child, cdk.CfnElement)
        return self.stack.get_logical_id(default_child)

    def resources(self, resource_type: str) -> dict[str, Any]:
        return dict(self.template.find_resources(resource_type))
