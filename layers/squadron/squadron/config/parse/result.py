"""What the parse gives: a repository's whole configuration, and a role resolved from it."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from squadron.config.builtin import DEFAULT_WAKE_PROMPT
from squadron.domain.repo_config.models import (
    AgentDefinition,
    ApprovalFlowsFile,
    BreakerLimits,
    Lifecycle,
    Provider,
    RepoConfig,
    RoleKind,
)


class ResolvedRole(BaseModel):
    """A role with everything decided: what the agent host needs to start a session."""

    model_config = ConfigDict(frozen=True)

    name: str
    kind: RoleKind
    lifecycle: Lifecycle
    model: str
    provider: Provider
    agent: AgentDefinition
    limits: BreakerLimits
    max_concurrent: int | None
    wake_prompt: str


class SquadronConfig(BaseModel):
    """A repository's whole configuration: config.yaml, agent definitions, approval flows."""

    model_config = ConfigDict(frozen=True)

    config: RepoConfig
    agents: dict[str, AgentDefinition]
    approval_flows: ApprovalFlowsFile
    files: tuple[str, ...] = Field(default=(), description="Files read, relative to .squadron/.")
    defaults: tuple[str, ...] = Field(
        default=(), description="Files absent, whose documented defaults apply."
    )
    commit_sha: str | None = Field(default=None, description="The default-branch commit it was read at.")
    context: str = Field(
        default="", description="The shared context (.squadron/context.md) every agent reads."
    )

    def role(self, name: str) -> ResolvedRole:
        """Role ``name`` resolved: role config over agent front matter over documented defaults."""
        role = self.config.roles[name]
        agent = self.agents[role.agent or name]
        lifecycle: Lifecycle = (
            role.lifecycle or agent.lifecycle or ("ephemeral" if role.kind == "pm" else "persistent")
        )
        return ResolvedRole(
            name=name,
            kind=role.kind,
            lifecycle=lifecycle,
            model=role.model or agent.model or self.config.default_model,
            provider=role.provider,
            agent=agent,
            limits=self.config.circuit_breakers.limits_for(name),
            max_concurrent=self.config.runtime.max_concurrent_per_role.get(name),
            wake_prompt=agent.wake_prompt or DEFAULT_WAKE_PROMPT,
        )

    def branch_for(self, role: str, issue_number: int, labels: Sequence[str] = ()) -> str:
        template = self.config.branch_naming.template_for(role, list(labels))
        return template.format(issue_number=issue_number, role=role)

    @property
    def uses_defaults_only(self) -> bool:
        return not self.files
