"""What a repository's routing follows (:class:`RoutingPolicy`): roles, labels, limits, escalation; built in the shell from its configuration."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from squadron.domain.agents import (
    RoleKind,
)
from squadron.domain.cost import DEFAULT_PRICES, PriceTable
from squadron.domain.orchestration import DEFAULT_ORCHESTRATION, Orchestration
from squadron.domain.pipelines.models import Pipeline
from squadron.domain.repo_config.flows import resolve_flow
from squadron.domain.repo_config.globs import fnmatch_matches
from squadron.domain.repo_config.models import (
    ApprovalFlowsFile,
    FlowEscalation,
    MemoryConfig,
    RetrospectiveConfig,
    TriageConfig,
)


@dataclass(frozen=True)
class RoutingPolicy:
    """The part of a repository's .squadron configuration that routing reads.

    Built from the repository's configuration by :func:`squadron.config.policy.routing_policy`;
    the defaults here equal the documented configuration defaults.
    """

    bot_login: str = "squadron[bot]"
    pm_role: str = "pm"
    pm_mentions: tuple[str, ...] = ("@squadron-pm",)
    default_dev_role: str = "feat-dev"
    label_roles: Mapping[str, str] = field(
        default_factory=lambda: {"bug": "bug-fix", "feature": "feat-dev", "retrospective": "retrospective"}
    )
    role_kinds: Mapping[str, RoleKind] = field(
        default_factory=lambda: {
            "pm": RoleKind.PM,
            "feat-dev": RoleKind.DEV,
            "bug-fix": RoleKind.DEV,
            "pr-review": RoleKind.REVIEW,
            "security-review": RoleKind.REVIEW,
            "retrospective": RoleKind.DEV,
        }
    )
    branch_templates: Mapping[str, str] = field(
        default_factory=lambda: {
            "feat-dev": "feat/issue-{issue_number}",
            "bug-fix": "fix/issue-{issue_number}",
            "retrospective": "squadron/retro-{issue_number}",
        }
    )
    #: Label -> branch template; the first label of the issue with one wins over the role's.
    label_branch_templates: Mapping[str, str] = field(
        default_factory=lambda: {"security": "security/issue-{issue_number}"}
    )
    default_branch_template: str = "squadron/issue-{issue_number}"
    #: Agent review roles every PR gets (auto-assigned), whatever its base branch.
    review_roles: tuple[str, ...] = ("pr-review",)
    #: (fnmatch pattern of a base branch, review roles its PRs get in addition).
    branch_review_roles: tuple[tuple[str, tuple[str, ...]], ...] = ()
    max_issue_depth: int = 3
    #: Handing an agent's issue to humans: the label, who is assigned, and whether a
    #: needs-human issue is filed.
    escalation_label: str = "needs-human"
    escalation_assignees: tuple[str, ...] = ()
    escalation_issue: bool = True
    #: ``@login`` of the humans an escalation notifies.
    escalation_mentions: tuple[str, ...] = ()
    #: Relaunches of a dead task before its agent is escalated instead.
    max_recoveries: int = 1
    #: The approval flows: their escalation rules (on_ci_failure, on_review_rejection) per base.
    flows: ApprovalFlowsFile = field(default_factory=ApprovalFlowsFile)
    #: Human groups by name, to expand ``human_group:<name>`` in escalation notices.
    human_groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: What one issue's agents may cost in USD (None: no budget), priced by ``prices``.
    issue_budget_usd: float | None = None
    prices: PriceTable = DEFAULT_PRICES
    #: Keep the repository's dashboard issue (``dashboard`` in its configuration).
    dashboard: bool = True
    #: The repository's memory bounds (``memory`` in its configuration).
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    #: When its retrospectives run (``retrospective`` in its configuration).
    retrospective: RetrospectiveConfig = field(default_factory=RetrospectiveConfig)
    #: Whose issues agents work on (``triage`` in its configuration: :mod:`squadron.domain.vouching`).
    triage: TriageConfig = field(default_factory=TriageConfig)
    #: The repository's pipelines (``pipelines`` in its configuration): what an event may start.
    pipelines: Mapping[str, Pipeline] = field(default_factory=dict)
    #: Who orchestrates its issues (``orchestration``: :mod:`squadron.domain.orchestration`).
    orchestration: Orchestration = DEFAULT_ORCHESTRATION

    def escalation_for(self, base_branch: str) -> FlowEscalation:
        return resolve_flow(self.flows, base_branch).escalation

    def mentions(self, principals: Iterable[str]) -> tuple[str, ...]:
        """``@login`` of every principal (``human_group:<g>`` expanded, ``user:<login>``), each once."""
        logins: list[str] = []
        for principal in principals:
            kind, _, name = str(principal).partition(":")
            members = self.human_groups.get(name, ()) if kind == "human_group" else (name,)
            logins += [f"@{login}" for login in members if f"@{login}" not in logins]
        return tuple(logins)

    def kind_of(self, role: str) -> RoleKind:
        return self.role_kinds.get(role, RoleKind.DEV)

    def dev_role_for(self, labels: Iterable[str]) -> str:
        for label in labels:
            role = self.label_roles.get(label)
            if role is not None:
                return role
        return self.default_dev_role

    def branch_for(self, role: str, issue_number: int, labels: Iterable[str] = ()) -> str:
        template = next(
            (self.label_branch_templates[label] for label in labels if label in self.label_branch_templates),
            self.branch_templates.get(role, self.default_branch_template),
        )
        return template.format(issue_number=issue_number, role=role)

    def issue_from_branch(self, branch: str) -> int | None:
        templates = {
            *self.branch_templates.values(),
            *self.label_branch_templates.values(),
            self.default_branch_template,
        }
        for template in sorted(templates):
            match = _template_regex(template).fullmatch(branch)
            if match:
                return int(match.group("issue_number"))
        return None

    def review_roles_for(self, base_branch: str) -> tuple[str, ...]:
        """The agent review roles a PR into ``base_branch`` gets: the default's plus matching rules'."""
        roles = list(self.review_roles)
        for pattern, extra in self.branch_review_roles:
            if fnmatch_matches(base_branch, pattern):
                roles += [role for role in extra if role not in roles]
        return tuple(roles)

    def mentions_pm(self, body: str) -> bool:
        return any(
            re.search(rf"(?<![\w-]){re.escape(handle)}(?![\w-])", body, re.IGNORECASE)
            for handle in self.pm_mentions
        )


@functools.cache
def _template_regex(template: str) -> re.Pattern[str]:
    """A branch template as a regex: ``{issue_number}`` captures digits, ``{role}`` a role name."""
    parts = re.split(r"(\{issue_number\}|\{role\})", template)
    pattern = "".join(
        "(?P<issue_number>[0-9]+)"
        if part == "{issue_number}"
        else "[a-z0-9][a-z0-9-]*"
        if part == "{role}"
        else re.escape(part)
        for part in parts
    )
    return re.compile(pattern)
