"""What every framework tool works with: the gateway's port and the host's state.

A tool's spec is the Copilot adapter's :class:`squadron.adapters.copilot.ToolSpec`.

:class:`BaseTools` holds the agent, its gateway, the role-enforcing GitHub client and the
configuration each topic's tools (:mod:`.task`, :mod:`.issues`, :mod:`.blockers`,
:mod:`.pull_requests`, :mod:`.memory`) read; :class:`~.framework.FrameworkTools` composes them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol

from squadron.adapters.git import WorkingCopy
from squadron.adapters.github.client import GitHubClient
from squadron.agent.reading import Authors, authors
from squadron.agent.writes import GatewayWrites
from squadron.domain.agents import AgentRecord, InboxItem
from squadron.domain.gateway_wire import ProposeChangeSetAnswer
from squadron.domain.repo_config.models import RepoConfig
from squadron.domain.trust import Reads


class FrameworkDoor(Protocol):
    """What the tools ask of the agent gateway (:class:`squadron.agent.door.Door`)."""

    def inbox_page(self) -> tuple[list[InboxItem], int]: ...
    def ack_inbox(self, agent_id: str | None, items: list[InboxItem]) -> None: ...
    def pushed(self) -> str: ...
    def register_blocker(self, issue: int, blocker: int, *, sleep: bool, note: str, what: str) -> str: ...
    def remember(self, fact: str, evidence: str, audience: str = "repository") -> str: ...
    def recall(self, query: str, limit: int = 10) -> list[str]: ...
    def publish_artifact(self, name: str, content: str, issue_number: int | None) -> str: ...
    def read_artifact(self, name: str, issue_number: int | None) -> str: ...
    def propose_change_set(
        self, issue: int, repositories: list[str], dependencies: list[tuple[str, str]], plan: str
    ) -> ProposeChangeSetAnswer: ...


@dataclass
class HostState:
    """What the tools decided about the task's end; the host acts on it after the turn."""

    ending: Literal["sleep", "escalate", "complete"] | None = None
    reason: str = ""
    #: What report_complete said the work produced (a pipeline agent stage's outputs).
    outputs: dict[str, str] = field(default_factory=dict)
    commands: list[str] = field(default_factory=list)


class BaseTools:
    """The agent, its gateway and clients, and the repository's configuration: what the tools read."""

    def __init__(
        self,
        *,
        agent: AgentRecord,
        launch_token: str,
        door: FrameworkDoor,
        github: GitHubClient,
        writes: GatewayWrites,
        state: HostState,
        clock: Callable[[], datetime],
        default_branch: str = "main",
        working_copy: WorkingCopy | None = None,
        repo_config: RepoConfig | None = None,
        stopped: Callable[[], str | None] | None = None,
    ) -> None:
        self.working_copy = working_copy
        self.repo_config = repo_config or RepoConfig()
        self.agent = agent
        self.launch_token = launch_token
        self.door = door
        #: What the agent writes on GitHub: carried out by the gateway, outside the task.
        self.writes = writes
        #: Why no framework tool may run now (a tripped breaker), checked in every tool.
        self.stopped = stopped or (lambda: None)
        self.github = github
        self.state = state
        self.clock = clock
        self.default_branch = default_branch

    @property
    def reads(self) -> Reads:
        """How this repository shows agents the text of people without write access."""
        return self.repo_config.trust.reads

    def authors(self) -> Authors:
        """The trust of a text's author (a GitHub user object); one per tool call."""
        return authors(self.github, self.repo_config.bot_login)
