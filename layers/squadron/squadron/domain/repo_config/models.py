"""Pydantic models of the three kinds of file in ``.squadron/``.

* ``config.yaml`` → :class:`RepoConfig`
* ``agents/<name>.md`` front matter → :class:`AgentFrontMatter` (the body is the system prompt)
* ``workflows/approval-flows.yaml`` → :class:`ApprovalFlowsFile` (AD-015 / OR-005)

Every model forbids unknown keys (a typo is an error) and is frozen. The field
defaults *are* the documented defaults: they feed the JSON Schemas and the
loader merges a repository's files over them.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from squadron.domain.cost import DEFAULT_PRICES, PriceTable
from squadron.domain.orchestration import DEFAULT_ORCHESTRATION, Orchestration
from squadron.domain.pipelines.models import Pipelines
from squadron.domain.repo_config.constants import BYOK_SECRET_PREFIX
from squadron.domain.repo_config.globs import fnmatch_matches
from squadron.domain.repo_config.limits import MAX_BRANCH_RULES, MAX_GLOB_LENGTH, MAX_PATH_GLOBS
from squadron.domain.repo_config.types import (
    BranchTemplate,
    Duration,
    FrameworkTool,
    HostTool,
    Login,
    Name,
    PathGlob,
    Principal,
    path_matches,
)

Lifecycle = Literal["persistent", "ephemeral"]
RoleKind = Literal["pm", "dev", "review"]
MergeMethod = Literal["merge", "squash", "rebase"]

#: A BYOK key's secret: its name under BYOK_SECRET_PREFIX, or that secret's ARN.
_BYOK_SECRET = re.compile(
    r"(arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:)?"
    + re.escape(BYOK_SECRET_PREFIX)
    + r"[\w/+=.@-]+"
)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --- config.yaml ------------------------------------------------------------------------------


class ProjectConfig(_Model):
    name: str | None = Field(
        default=None, description="Project name shown to agents; defaults to the repository name."
    )
    description: str = Field(default="", description="One paragraph about the project, given to every agent.")


class LabelConfig(_Model):
    description: str = Field(default="", description="What the label means; the PM reads it when triaging.")
    color: str | None = Field(
        default=None, pattern=r"^[0-9a-fA-F]{6}$", description="Hex colour without '#'."
    )
    role: Name | None = Field(
        default=None, description="Issues carrying this label are assigned to this role (a dev role)."
    )


DEFAULT_LABELS: dict[str, dict[str, Any]] = {
    "feature": {"description": "New functionality.", "color": "a2eeef", "role": "feat-dev"},
    "bug": {"description": "Something is broken.", "color": "d73a4a", "role": "bug-fix"},
    "security": {"description": "Security-sensitive change.", "color": "b60205"},
    "blocked": {"description": "Waiting on another issue.", "color": "fbca04"},
    "needs-human": {"description": "An agent needs a human to decide or act.", "color": "e99695"},
    "retrospective": {
        "description": "The agents' retrospective of a period (opened by Squadron).",
        "color": "5319e7",
        "role": "retrospective",
    },
}


class BranchNaming(_Model):
    """Branch per issue (AD-004). The first label of the issue with a template wins, then the role's."""

    default: BranchTemplate = Field(
        default="squadron/issue-{issue_number}", description="Template when neither label nor role has one."
    )
    roles: dict[Name, BranchTemplate] = Field(
        default_factory=lambda: {
            "feat-dev": "feat/issue-{issue_number}",
            "bug-fix": "fix/issue-{issue_number}",
            "retrospective": "squadron/retro-{issue_number}",
        },
        description="Template per role.",
    )
    labels: dict[str, BranchTemplate] = Field(
        default_factory=lambda: {"security": "security/issue-{issue_number}"},
        description="Template per issue label; wins over the role's.",
    )

    def template_for(self, role: str, labels: tuple[str, ...] | list[str] = ()) -> str:
        for label in labels:
            if label in self.labels:
                return self.labels[label]
        return self.roles.get(role, self.default)


class HumanGroup(_Model):
    description: str = Field(default="", description="Who they are and when to involve them.")
    members: list[Login] = Field(min_length=1, description="GitHub logins of the group's members.")


class CopilotProvider(_Model):
    """Models served through GitHub Copilot (the default)."""

    type: Literal["copilot"] = "copilot"


class ByokProvider(_Model):
    """Bring your own key: the key lives in the secret store, only its id is configured."""

    type: Literal["byok"]
    provider_type: Literal["openai", "azure", "anthropic"] = Field(description="The provider's API flavour.")
    base_url: str = Field(pattern=r"^https?://\S+$", description="The provider's API base URL.")
    api_key_secret: str = Field(
        json_schema_extra={"pattern": _BYOK_SECRET.pattern},
        description=(
            "Id (name or ARN) of the secret holding the API key, under squadron/byok/ (the only secrets "
            "agent tasks may read). The key itself never goes in config."
        ),
    )
    azure_api_version: str | None = Field(default=None, description="API version (Azure only).")

    @field_validator("api_key_secret")
    @classmethod
    def _readable_by_agents(cls, value: str) -> str:
        if not _BYOK_SECRET.fullmatch(value):
            raise ValueError(
                f"{value!r} is not under {BYOK_SECRET_PREFIX}: agent tasks may read only the secrets "
                f"there; store the key as {BYOK_SECRET_PREFIX}<name> and name that (or its ARN)"
            )
        return value

    @model_validator(mode="before")
    @classmethod
    def _no_inline_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key in ("api_key", "key", "token", "bearer_token"):
                if key in data:
                    raise ValueError(
                        f"'{key}' is not allowed: never put a key in config; name its secret in api_key_secret"
                    )
        return data


Provider = Annotated[CopilotProvider | ByokProvider, Field(discriminator="type")]


class RoleConfig(_Model):
    kind: RoleKind = Field(
        description="pm (triage, one per repository), dev (works an issue), review (reviews a PR)."
    )
    description: str = Field(
        default="", description="What the role is for; the PM reads it to assign issues."
    )
    agent: Name | None = Field(
        default=None, description="Agent definition (agents/<agent>.md); defaults to the role's name."
    )
    lifecycle: Lifecycle | None = Field(
        default=None,
        description="persistent: one session that sleeps and wakes; ephemeral: a fresh session per event batch. "
        "Defaults to the agent definition's, else ephemeral for pm and persistent otherwise.",
    )
    model: str | None = Field(
        default=None,
        min_length=1,
        description="Model name; defaults to the agent definition's, else default_model.",
    )
    provider: Provider = Field(default_factory=CopilotProvider, description="Who serves the model.")


DEFAULT_ROLES: dict[str, dict[str, Any]] = {
    "pm": {"kind": "pm", "description": "Triages issues, labels and assigns them, tracks blockers."},
    "feat-dev": {"kind": "dev", "description": "Implements features on a feat/ branch and opens a PR."},
    "bug-fix": {"kind": "dev", "description": "Reproduces and fixes bugs with a regression test."},
    "pr-review": {"kind": "review", "description": "Reviews pull requests for correctness and tests."},
    "security-review": {"kind": "review", "description": "Reviews pull requests for security problems."},
    "retrospective": {
        "kind": "dev",
        "description": "Holds the retrospective: narrative, action items, and changes to .squadron/ as a PR.",
        "lifecycle": "ephemeral",
    },
}


class BreakerLimits(_Model):
    """The five hard limits of AD-018, per agent task."""

    max_iterations: int = Field(default=5, ge=1, description="Test/fix cycles (test runner invocations).")
    max_tool_calls: int = Field(default=200, ge=1, description="Tool calls per task.")
    max_turns: int = Field(default=50, ge=1, description="Conversation turns per task.")
    max_active_duration: Duration = Field(default=7200, ge=60, description="Wall-clock time awake per task.")
    max_sleep_duration: Duration = Field(
        default=86400, ge=60, description="Time asleep on a blocker before escalation."
    )
    warning_ratio: float = Field(
        default=0.8, gt=0, lt=1, description="Fraction of a limit at which the agent is warned to wrap up."
    )


class BreakerOverrides(_Model):
    """Per-role overrides; an absent key keeps the default."""

    max_iterations: int | None = Field(default=None, ge=1)
    max_tool_calls: int | None = Field(default=None, ge=1)
    max_turns: int | None = Field(default=None, ge=1)
    max_active_duration: Duration | None = Field(default=None, ge=60)
    max_sleep_duration: Duration | None = Field(default=None, ge=60)
    warning_ratio: float | None = Field(default=None, gt=0, lt=1)


class CircuitBreakers(_Model):
    defaults: BreakerLimits = Field(default_factory=BreakerLimits, description="Limits of every role.")
    roles: dict[Name, BreakerOverrides] = Field(
        default_factory=lambda: {
            "pm": BreakerOverrides(max_tool_calls=60, max_turns=20, max_active_duration=900)
        },
        description="Per-role overrides merged over the defaults.",
    )

    def limits_for(self, role: str) -> BreakerLimits:
        override = self.roles.get(role)
        if override is None:
            return self.defaults
        changes = override.model_dump(exclude_none=True)
        return self.defaults.model_copy(update=changes)


class RuntimeLimits(_Model):
    max_concurrent_agents: int = Field(
        default=10, ge=1, description="Agent tasks running at once in the repository."
    )
    max_concurrent_per_role: dict[Name, int] = Field(
        default_factory=dict, description="Cap per role (within max_concurrent_agents)."
    )
    heartbeat_interval: Duration = Field(
        default=60, ge=10, description="How often a running task heartbeats."
    )
    stale_after: Duration = Field(
        default=600, ge=60, description="A task silent this long is presumed dead and reconciled."
    )


class EscalationConfig(_Model):
    """What happens when an agent hands an issue to humans (breaker trip, escalate_to_human)."""

    label: str = Field(default="needs-human", min_length=1, description="Label put on the escalated issue.")
    notify: list[Principal] = Field(
        default_factory=list, description="Mentioned on escalation: human_group:<group> or user:<login>."
    )
    assign: list[Login] = Field(default_factory=list, description="Logins assigned to the escalated issue.")
    create_issue: bool = Field(
        default=True, description="Open a separate needs-human issue (true) or only label the agent's issue."
    )


class MemoryConfig(_Model):
    """What agents remember in this repository (see docs/memory.md)."""

    enabled: bool = Field(default=True, description="Agents may remember and recall facts.")
    expiry_days: int = Field(
        default=28,
        ge=1,
        le=365,
        description="Days a fact is kept after it was last used (pinned facts never expire).",
    )
    max_facts: int = Field(
        default=200, ge=1, le=1000, description="Most facts the repository's memory holds."
    )
    proposed_per_agent: int = Field(
        default=20,
        ge=1,
        le=100,
        description="Most facts one agent may have waiting for a person's confirmation.",
    )
    brief_chars: int = Field(
        default=2000,
        ge=0,
        le=8000,
        description="Characters of memory every session starts with (the most relevant facts; 0: none).",
    )


class TrustConfig(_Model):
    """Whose text agents read (see docs/security.md, "Threat model")."""

    reads: Literal["writers", "fenced"] = Field(
        default="writers",
        description=(
            "What agents read of text by people without write access (issue and pull request titles "
            "and bodies, comments, reviews, linked issues): `writers` withholds it (the agent learns "
            "only that it is there and who wrote it), `fenced` shows it inside a fence naming its "
            "author as untrusted data. An issue's body is always the version a person with write "
            "access vouched for by assigning the App or editing it."
        ),
    )


class TriageConfig(_Model):
    """Whose issues agents may work on (see docs/security.md, "Threat model")."""

    trust: Literal["writers", "everyone"] = Field(
        default="writers",
        description=(
            "writers: an issue starts no agent, and the PM's acts reach no other issue from it, until "
            "someone with write access vouches for it (they opened it, assigned the App or added the "
            "approval label); everyone: every issue is trusted (only where everyone who can open one is)."
        ),
    )
    approval_label: str = Field(
        default="squadron:approved",
        min_length=1,
        max_length=50,
        description="The label with which someone with write access approves an outsider's issue for the agents.",
    )


class RetrospectiveConfig(_Model):
    """When the agents' retrospective runs (see docs/memory.md, "Retrospectives")."""

    enabled: bool = Field(default=True, description="Hold retrospectives in this repository.")
    schedule: str = Field(
        default="cron(0 9 ? * MON *)",
        pattern=r"^(cron\([0-9A-Za-z*?/,#L -]{9,100}\)|rate\([1-9][0-9]{0,3} (hour|hours|day|days)\))$",
        description="An EventBridge Scheduler expression (UTC): weekly on Monday 09:00 by default.",
    )
    on_milestone: bool = Field(default=True, description="Also hold one when a milestone closes.")


class RepoConfig(_Model):
    """``.squadron/config.yaml``."""

    version: Literal[1] = Field(default=1, description="Schema version of this file.")
    project: ProjectConfig = Field(default_factory=ProjectConfig)
    bot_login: str = Field(
        default="squadron[bot]",
        min_length=1,
        description=(
            "The App's bot login; its own events are ignored. A deployed stack acts as its App "
            "(<github_app_slug>[bot]) whatever this says; the value serves where no deployment does."
        ),
    )
    pm_mentions: list[str] = Field(
        default_factory=lambda: ["@squadron-pm"], description="Handles that address the PM in a comment."
    )
    default_model: str = Field(
        default="claude-sonnet-4.5", min_length=1, description="Model of roles that name none."
    )
    default_dev_role: Name = Field(
        default="feat-dev", description="Dev role for issues whose labels map to none."
    )
    max_issue_depth: int = Field(
        default=3, ge=1, le=10, description="Longest chain of blocker issues agents may open under one issue."
    )
    labels: dict[str, LabelConfig] = Field(
        default_factory=lambda: {k: LabelConfig(**v) for k, v in DEFAULT_LABELS.items()},
        description="The label taxonomy.",
    )
    branch_naming: BranchNaming = Field(default_factory=BranchNaming)
    human_groups: dict[Name, HumanGroup] = Field(default_factory=dict, description="Named groups of humans.")
    roles: dict[Name, RoleConfig] = Field(
        default_factory=lambda: {k: RoleConfig(**v) for k, v in DEFAULT_ROLES.items()},
        description="Agent roles. Set a default role to null to remove it.",
    )
    circuit_breakers: CircuitBreakers = Field(default_factory=CircuitBreakers)
    runtime: RuntimeLimits = Field(default_factory=RuntimeLimits)
    escalation: EscalationConfig = Field(default_factory=EscalationConfig)
    issue_budget_usd: float | None = Field(
        default=None,
        gt=0,
        le=100_000,
        description=(
            "What one issue's agents may cost (tokens priced by `pricing`, and task time): a warning "
            "comment at 80%, and at the limit its agent is handed to humans instead of going on."
        ),
    )
    dashboard: bool = Field(
        default=True, description="Keep a dashboard issue of what the agents are doing in this repository."
    )
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    triage: TriageConfig = Field(default_factory=TriageConfig)
    retrospective: RetrospectiveConfig = Field(default_factory=RetrospectiveConfig)
    trust: TrustConfig = Field(default_factory=TrustConfig)
    pricing: PriceTable = Field(
        default_factory=lambda: DEFAULT_PRICES,
        description="USD per million input and output tokens per model (exact name or `prefix*`), and per task hour.",
    )
    pipelines: Pipelines = Field(
        default_factory=dict,
        description=(
            "Pipelines in the reference's format: stages, gates, transitions, reactive "
            "events (see docs/pipelines.md). Published as Step Functions state machines, started "
            "by their triggers and carried out by the router, agents and people included."
        ),
    )
    orchestration: Orchestration = Field(
        default=DEFAULT_ORCHESTRATION,
        description="`pipelines`: the built-in default pipelines run beside the repository's own, and an "
        "event that starts a run leaves its work to the run; `fixed`: the fixed routing starts agents, "
        "the repository's own pipelines run beside it.",
    )

    def label_roles(self) -> dict[str, str]:
        """Label → role, for the labels that route issues."""
        return {name: label.role for name, label in self.labels.items() if label.role is not None}


# --- agents/<name>.md -------------------------------------------------------------------------


class AgentFrontMatter(_Model):
    """The YAML front matter of ``agents/<name>.md``; the Markdown body is the system prompt."""

    name: Name = Field(description="The agent's name; must match the file name.")
    description: str = Field(min_length=1, description="One line on what the agent does.")
    model: str | None = Field(
        default=None, min_length=1, description="Preferred model (the role may override)."
    )
    lifecycle: Lifecycle | None = Field(
        default=None, description="persistent or ephemeral (the role may override)."
    )
    tools: list[FrameworkTool] = Field(
        default_factory=list, description="Framework tools the agent may call (an explicit allowlist)."
    )
    host_tools: list[HostTool] = Field(
        default_factory=list, description="CLI built-in host tools (bash, view, edit...) the agent opts into."
    )
    wake_prompt: str | None = Field(
        default=None, description="Sent when a persistent agent wakes; may use the wake placeholders."
    )

    @model_validator(mode="after")
    def _unique_tools(self) -> AgentFrontMatter:
        for field_name in ("tools", "host_tools"):
            values: list[str] = getattr(self, field_name)
            duplicates = sorted({v for v in values if values.count(v) > 1})
            if duplicates:
                raise ValueError(f"{field_name} lists {', '.join(duplicates)} more than once")
        return self


class AgentDefinition(AgentFrontMatter):
    """A loaded agent definition: front matter plus the system prompt."""

    prompt: str = Field(description="The system prompt (Markdown body), with {placeholders}.")
    source: str = Field(default="", description="The file it came from, or 'built-in'.")


# --- workflows/approval-flows.yaml ------------------------------------------------------------


class ReviewRequirement(_Model):
    role: Principal = Field(
        description="agent:<role> (a squadron/<role> status check) or human_group:<group>."
    )
    min_approvals: int = Field(default=1, ge=1, description="Approvals needed (human groups).")
    auto_assign: bool = Field(default=True, description="Request the review as soon as the PR opens.")
    required: bool = Field(default=True, description="Blocks the merge until satisfied.")


class MergePolicy(_Model):
    method: MergeMethod = Field(default="squash", description="merge, squash or rebase.")
    auto_merge: bool = Field(default=False, description="Merge as soon as every requirement is met.")
    require_ci_pass: bool = Field(default=True, description="Every required status check must pass.")
    require_human: bool = Field(default=False, description="A human must approve (and merge) the PR.")
    delete_branch: bool = Field(default=True, description="Delete the branch after merging.")


class MergePolicyOverride(_Model):
    method: MergeMethod | None = None
    auto_merge: bool | None = None
    require_ci_pass: bool | None = None
    require_human: bool | None = None
    delete_branch: bool | None = None


class ProtectedPath(_Model):
    """Changing a matching file adds reviews (evaluated by the framework on the PR's file list)."""

    paths: list[PathGlob] = Field(min_length=1, description="Path globs: '*' within a segment, '**' across.")
    description: str = Field(default="", description="Why these paths are sensitive.")
    required_reviews: list[ReviewRequirement] = Field(default_factory=list, description="Reviews added.")
    require_human: bool = Field(default=False, description="A human must approve when these paths change.")

    @model_validator(mode="after")
    def _adds_something(self) -> ProtectedPath:
        if not self.required_reviews and not self.require_human:
            raise ValueError("a protected path must add required_reviews or require_human")
        return self

    def matches(self, path: str) -> bool:
        return any(path_matches(glob, path) for glob in self.paths)


class EscalationRule(_Model):
    max_retries: int | None = Field(default=None, ge=0, description="Retries (CI re-runs, fix rounds) first.")
    hours: float | None = Field(
        default=None, gt=0, description="Hours to wait before escalating (on_timeout)."
    )
    notify: list[Principal] = Field(default_factory=list, description="human_group:<group> or user:<login>.")
    label: str | None = Field(default=None, description="Label added on escalation.")
    assign: list[Login] = Field(default_factory=list, description="Logins assigned on escalation.")


class FlowEscalation(_Model):
    on_ci_failure: EscalationRule = Field(
        default_factory=lambda: EscalationRule(max_retries=3, label="needs-human"),
        description="Required checks fail.",
    )
    on_review_rejection: EscalationRule = Field(
        default_factory=lambda: EscalationRule(max_retries=3, label="needs-human"),
        description="A required review requests changes.",
    )
    on_timeout: EscalationRule = Field(
        default_factory=lambda: EscalationRule(hours=48, label="needs-human"),
        description="The PR waits for a requirement too long.",
    )


class FlowEscalationOverride(_Model):
    on_ci_failure: EscalationRule | None = None
    on_review_rejection: EscalationRule | None = None
    on_timeout: EscalationRule | None = None


class ApprovalFlow(_Model):
    required_reviews: list[ReviewRequirement] = Field(
        default_factory=lambda: [ReviewRequirement(role="agent:pr-review")],
        description="Reviews every PR needs.",
    )
    required_status_checks: list[str] = Field(
        default_factory=list, description="Status check contexts that must pass (CI jobs)."
    )
    merge_policy: MergePolicy = Field(default_factory=MergePolicy)
    protected_paths: list[ProtectedPath] = Field(default_factory=list)
    escalation: FlowEscalation = Field(default_factory=FlowEscalation)


class BranchRule(_Model):
    """Overrides for PRs whose base branch matches ``pattern`` (fnmatch); absent keys inherit the default.

    When several rules match, the flow resolver combines them with the default,
    the most restrictive requirement winning.
    """

    pattern: str = Field(
        min_length=1,
        max_length=MAX_GLOB_LENGTH,
        description="fnmatch pattern of the PR's base branch: main, release/*.",
    )
    description: str = ""
    required_reviews: list[ReviewRequirement] | None = None
    required_status_checks: list[str] | None = None
    merge_policy: MergePolicyOverride | None = None
    protected_paths: list[ProtectedPath] | None = None
    escalation: FlowEscalationOverride | None = None

    def matches(self, branch: str) -> bool:
        return fnmatch_matches(branch, self.pattern)


class ApprovalFlowsFile(_Model):
    """``.squadron/workflows/approval-flows.yaml`` (AD-015)."""

    version: Literal[1] = Field(default=1, description="Schema version of this file.")
    default: ApprovalFlow = Field(default_factory=ApprovalFlow, description="The flow of every PR.")
    branch_rules: list[BranchRule] = Field(
        default_factory=list, max_length=MAX_BRANCH_RULES, description="Per-base-branch overrides."
    )

    @model_validator(mode="after")
    def _bounded_globs(self) -> ApprovalFlowsFile:
        flows: list[ApprovalFlow | BranchRule] = [self.default, *self.branch_rules]
        count = sum(len(path.paths) for flow in flows for path in flow.protected_paths or [])
        if count > MAX_PATH_GLOBS:
            raise ValueError(
                f"{count} path globs in protected_paths, over the limit of {MAX_PATH_GLOBS} "
                "for the whole file (MAX_PATH_GLOBS)"
            )
        return self

    def rules_for(self, branch: str) -> list[BranchRule]:
        return [rule for rule in self.branch_rules if rule.matches(branch)]
