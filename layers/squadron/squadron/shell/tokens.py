"""Token vending: an agent task gets a GitHub token narrowed to its repository and role.

The App's private key never reaches an agent task. The task asks this vendor
(a Lambda only the task role may invoke) with its agent id and launch token;
the vendor hands out an installation token only while that task is the agent's
latest launch and holds the agent's lease, narrowed to the agent's repository
and to the permissions of its role kind.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from squadron.adapters.github.auth import GitHubApp
from squadron.domain.agents import LIVE, AgentRecord
from squadron.domain.permissions import INSTALLATION_PERMISSIONS, caller_kind
from squadron.domain.routing import launch_token
from squadron.errors import SquadronError


class TokenRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    agent_id: str = Field(min_length=1, max_length=200)
    launch_token: str = Field(min_length=1, max_length=64)


@dataclass(frozen=True)
class VendedToken:
    token: str
    expires_at: datetime
    repository: str
    permissions: dict[str, str]

    def __repr__(self) -> str:
        return f"VendedToken({self.repository}, expires {self.expires_at.isoformat()}, {self.permissions})"


class TokenRefusedError(SquadronError):
    """The requesting task may not have a token (no such agent, replaced task, no lease...).

    ``code`` names the rule that refused it (a metric dimension: a small closed set).
    """

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        super().__init__(message)


class AgentReader(Protocol):
    def get_agent(self, agent_id: str) -> AgentRecord | None: ...


def _now() -> datetime:
    return datetime.now(UTC)


class TokenVendor:
    def __init__(
        self, *, registry: AgentReader, app: GitHubApp, clock: Callable[[], datetime] = _now
    ) -> None:
        self.registry = registry
        self.app = app
        self.clock = clock

    def vend(self, request: TokenRequest) -> VendedToken:
        agent = self.registry.get_agent(request.agent_id)
        if agent is None:
            raise TokenRefusedError("unknown_agent", f"no agent {request.agent_id}")
        if agent.status not in LIVE:
            raise TokenRefusedError(
                "not_working", f"agent {agent.agent_id} is {agent.status}; only a working agent gets a token"
            )
        if launch_token(agent) != request.launch_token:
            raise TokenRefusedError(
                "replaced", f"task {request.launch_token} was replaced by {launch_token(agent)}"
            )
        held_by_other = agent.lease_owner not in (None, request.launch_token) and agent.lease_is_live(
            self.clock()
        )
        if held_by_other:
            raise TokenRefusedError(
                "lease_held", f"the lease of {agent.agent_id} is held by {agent.lease_owner}"
            )
        if agent.installation_id is None:
            raise TokenRefusedError("no_installation", f"agent {agent.agent_id} has no installation")
        permissions = INSTALLATION_PERMISSIONS[caller_kind(agent.kind)]
        token = self.app.installation_token(
            agent.installation_id, repositories=(agent.repo_full_name,), permissions=permissions
        )
        return VendedToken(token.token, token.expires_at, agent.repo_full_name, dict(permissions))
