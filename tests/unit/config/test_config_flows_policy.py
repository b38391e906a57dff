"""Approval-flow resolution per base branch, and the routing policy derived from a configuration."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from squadron.config import load_directory
from squadron.config.default_pipelines import default_pipelines
from squadron.config.parse import parse_files
from squadron.config.policy import routing_policy
from squadron.domain.agents import RoleKind
from squadron.domain.orchestration import DEFAULT_ORCHESTRATION, effective_pipelines
from squadron.domain.repo_config.flows import agent_review_roles, resolve_flow
from squadron.domain.repo_config.models import ApprovalFlowsFile
from squadron.domain.routing import RoutingPolicy

REFERENCE = Path(__file__).resolve().parents[3] / ".squadron"

FLOWS = ApprovalFlowsFile.model_validate(
    {
        "default": {
            "required_reviews": [
                {"role": "agent:pr-review"},
                {"role": "human_group:devs", "min_approvals": 1},
            ],
            "required_status_checks": ["ci"],
            "merge_policy": {"method": "squash", "auto_merge": True, "require_human": False},
            "escalation": {"on_timeout": {"hours": 48, "label": "needs-human"}},
        },
        "branch_rules": [
            {
                "pattern": "release/*",
                "required_reviews": [{"role": "human_group:devs", "min_approvals": 2}],
                "required_status_checks": ["ci", "e2e"],
                "merge_policy": {"method": "merge", "require_human": True},
                "escalation": {"on_timeout": {"hours": 72, "notify": ["user:alice"]}},
            },
            {
                "pattern": "release/1.*",
                "required_reviews": [{"role": "agent:security-review", "auto_assign": False}],
                "merge_policy": {"auto_merge": False, "delete_branch": False},
                "escalation": {"on_timeout": {"hours": 12, "label": "urgent"}},
            },
        ],
    }
)


@dataclass(frozen=True)
class Expected:
    checks: list[str]
    approvals: int
    method: str
    auto_merge: bool
    human: bool
    delete: bool
    hours: float
    label: str
    agents: tuple[str, ...]


@pytest.mark.parametrize(
    ("branch", "expected"),
    [
        ("main", Expected(["ci"], 1, "squash", True, False, True, 48, "needs-human", ("pr-review",))),
        (
            "release/2.0",
            Expected(["ci", "e2e"], 2, "merge", True, True, True, 48, "needs-human", ("pr-review",)),
        ),
        (
            "release/1.4",
            Expected(
                ["ci", "e2e"], 2, "merge", False, True, False, 12, "urgent", ("pr-review", "security-review")
            ),
        ),
    ],
    ids=["no rule matches", "one rule", "two rules combine, strictest wins"],
)
def test_resolve_flow(branch: str, expected: Expected) -> None:
    flow = resolve_flow(FLOWS, branch)
    assert flow.required_status_checks == expected.checks
    assert {r.role: r.min_approvals for r in flow.required_reviews}["human_group:devs"] == expected.approvals
    merge = flow.merge_policy
    assert (merge.method, merge.auto_merge) == (expected.method, expected.auto_merge)
    assert (merge.require_human, merge.delete_branch) == (expected.human, expected.delete)
    timeout = flow.escalation.on_timeout
    assert (timeout.hours, timeout.label) == (expected.hours, expected.label)
    assert agent_review_roles(flow.required_reviews, auto_assigned_only=False) == expected.agents


def test_a_rule_never_loosens_the_default() -> None:
    flows = ApprovalFlowsFile.model_validate(
        {
            "default": {
                "merge_policy": {"require_human": True, "require_ci_pass": True, "auto_merge": False}
            },
            "branch_rules": [
                {
                    "pattern": "*",
                    "merge_policy": {"require_human": False, "require_ci_pass": False, "auto_merge": True},
                }
            ],
        }
    )
    merge = resolve_flow(flows, "main").merge_policy
    assert (merge.require_human, merge.require_ci_pass, merge.auto_merge) == (True, True, False)


def test_reference_config_gives_its_routing_policy() -> None:
    policy = routing_policy(load_directory(REFERENCE))
    assert policy.bot_login == "squadron[bot]"
    assert policy.pm_role == "pm"
    assert policy.role_kinds["security-review"] is RoleKind.REVIEW
    assert policy.dev_role_for(["bug"]) == "bug-fix"
    assert policy.branch_for("feat-dev", 38) == "feat/issue-38"
    assert policy.branch_for("feat-dev", 38, ["security"]) == "security/issue-38"
    assert policy.review_roles_for("main") == ("pr-review",)
    assert policy.max_issue_depth == 3


def test_defaults_only_policy_equals_the_routing_defaults() -> None:
    """The documented configuration defaults and RoutingPolicy's own defaults must agree; the
    defaults-only policy also carries the built-in pipelines its default orchestration runs."""
    builtins = effective_pipelines({}, default_pipelines(), DEFAULT_ORCHESTRATION)
    assert builtins
    assert routing_policy(parse_files({})) == RoutingPolicy(pipelines=builtins)


@pytest.mark.parametrize(
    ("branch", "issue"),
    [
        ("feat/issue-38", 38),
        ("fix/issue-7", 7),
        ("security/issue-12", 12),
        ("squadron/issue-3", 3),
        ("feat/issue-38x", None),
        ("feat/issue-", None),
        ("main", None),
        ("other/feat/issue-38", None),
    ],
)
def test_issue_from_branch_knows_every_template(branch: str, issue: int | None) -> None:
    assert RoutingPolicy().issue_from_branch(branch) == issue


def test_role_placeholder_in_branch_templates() -> None:
    policy = RoutingPolicy(branch_templates={"feat-dev": "agents/{role}/{issue_number}"})
    assert policy.branch_for("feat-dev", 5) == "agents/feat-dev/5"
    assert policy.issue_from_branch("agents/feat-dev/5") == 5


def test_branch_rules_add_reviewers_by_base_branch() -> None:
    files = {
        "workflows/approval-flows.yaml": (
            "version: 1\n"
            "branch_rules:\n"
            "  - pattern: 'release/*'\n"
            "    required_reviews:\n"
            "      - role: agent:security-review\n"
        )
    }
    policy = routing_policy(parse_files(files))
    assert policy.review_roles_for("main") == ("pr-review",)
    assert policy.review_roles_for("release/2") == ("pr-review", "security-review")
