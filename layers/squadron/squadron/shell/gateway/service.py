"""The agent gateway's service: its dependencies, one call served (parsed, dispatched from the
table of operations, a refusal answered), and what the operations share (GitHub as the agent's
role, an envelope stamped from the verified record)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from squadron.adapters.github.auth import GitHubApp
from squadron.adapters.github.client import GitHubClient
from squadron.adapters.secret_scan import find_secrets
from squadron.config.parse import SquadronConfig
from squadron.domain.agents import AgentRecord
from squadron.domain.commands import SquadronCommand
from squadron.domain.event_fields import Actor
from squadron.domain.events import EventEnvelope, command_envelope
from squadron.domain.gateway_wire import Refusal, Request
from squadron.domain.issue_budget import LiveSpend
from squadron.domain.launches import LaunchRefusedError
from squadron.domain.permissions import agent_caller
from squadron.domain.retention import DEFAULT_RETENTION_DAYS
from squadron.domain.routing.snapshot import IssueView
from squadron.domain.threats import Finding
from squadron.ports import ArtifactStore, EventQueue, MetricsSink, RetroStore, SecretSource
from squadron.registry_ports import AgentListings, AgentRecords, Inboxes, Leases, WriteClaims
from squadron.shell.change_sets import ChangeSetDesk
from squadron.shell.gateway.change_sets import OPS as CHANGE_SET_OPS
from squadron.shell.gateway.janitor import OPS as JANITOR_OPS
from squadron.shell.gateway.memory import OPS as MEMORY_OPS
from squadron.shell.gateway.protocol import Answer, Handler, Served, parse_request
from squadron.shell.gateway.task import OPS as TASK_OPS
from squadron.shell.gateway.writes import OPS as WRITE_OPS
from squadron.shell.memory import Memory


def _now() -> datetime:
    return datetime.now(UTC)


#: Every operation's handler, by the request's ``op``.
HANDLERS: Mapping[str, Handler] = {**TASK_OPS, **WRITE_OPS, **MEMORY_OPS, **JANITOR_OPS, **CHANGE_SET_OPS}


# --- ports --------------------------------------------------------------------------------------


class GatewayRegistry(AgentRecords, AgentListings, Leases, Inboxes, WriteClaims, Protocol):
    """The registry's ports the gateway uses (:mod:`squadron.registry_ports`), and one read of
    the issue graph (what a task's issue or pull request is linked to)."""

    def issue_view(self, repo_id: int, number: int) -> IssueView: ...
    def record_live_spend(self, repo_id: int, issue: int, spend: LiveSpend) -> None: ...


# --- the service --------------------------------------------------------------------------------


class AgentGateway:
    def __init__(
        self,
        *,
        registry: GatewayRegistry,
        app: GitHubApp,
        queue: EventQueue,
        secrets: SecretSource,
        config_for: Callable[[AgentRecord], SquadronConfig],
        agent_metrics: MetricsSink,
        bot_login: str = "squadron[bot]",
        copilot_token_secret: str | None = None,
        memory: Memory | None = None,
        retros: RetroStore | None = None,
        artifacts: ArtifactStore | None = None,
        state_retention: timedelta = timedelta(days=DEFAULT_RETENTION_DAYS),
        clock: Callable[[], datetime] = _now,
        scan: Callable[[list[tuple[str, str]]], list[Finding]] = find_secrets,
        change_sets: ChangeSetDesk | None = None,
    ) -> None:
        #: Stores the PM's change-set proposals (None: a deployment without refuses them).
        self.change_sets = change_sets
        #: Finds secrets in what an agent asks the App to write (kinds and places only).
        self.scan = scan
        #: The repositories' memory (None: a deployment without one refuses remember).
        self.memory = memory
        #: The repositories' retrospectives: what a retrospective's agent opens is tracked there.
        self.retros = retros
        #: What agents produce for each other (a plan), with producer and consumers.
        self.artifact_store = artifacts
        self.registry = registry
        self.app = app
        self.queue = queue
        self.secrets = secrets
        self.config_for = config_for
        self.agent_metrics = agent_metrics
        self.bot_login = bot_login
        self.copilot_token_secret = copilot_token_secret
        #: How long a finished agent's working copy and session are kept on the shared volume.
        self.state_retention = state_retention
        self.clock = clock

    def serve(self, event: Any) -> Served:
        """Parse, verify and answer one invocation; a refusal is an answer too (never raised)."""
        op = str(event.get("op"))[:32] if isinstance(event, dict) else "?"
        request: Request | None = None
        try:
            request = parse_request(event)
            answer = self.handle(request)
        except LaunchRefusedError as exc:
            return Served(
                Refusal.of(exc).wire(),
                op,
                request.agent_id if request else None,
                request.launch_token if request else None,
                refused=exc.code,
            )
        return Served(answer.body, request.op, request.agent_id, request.launch_token, secret=answer.secret)

    def handle(self, request: Request) -> Answer:
        """Verify the caller, then do what it asked; LaunchRefusedError when refused."""
        return HANDLERS[request.op](self, request)

    def client(self, agent: AgentRecord, permissions: Mapping[str, str]) -> GitHubClient:
        """GitHub as ``agent``'s role (the caller from its record), with a token narrowed to ``permissions``."""
        installation, repo = agent.installation_id, agent.repo_full_name
        if installation is None:
            raise LaunchRefusedError("forbidden", f"agent {agent.agent_id} has no installation")
        chosen = dict(permissions)
        return GitHubClient(
            http=self.app.http,
            token=lambda: (
                self.app.installation_token(installation, repositories=(repo,), permissions=chosen).token
            ),
            installation_id=installation,
            repo=repo,
            caller=agent_caller(agent),
        )

    def stamped(self, agent: AgentRecord, command: SquadronCommand, delivery_id: str) -> EventEnvelope:
        """``command`` as the envelope of ``agent``'s task: its repository, installation and id
        stamped from the verified record, the App as sender, the agent as verified source."""
        return command_envelope(
            command,
            repository={"id": agent.repo_id, "full_name": agent.repo_full_name, "default_branch": None},
            installation_id=agent.installation_id,
            delivery_id=delivery_id,
            now=self.clock(),
            origin="agent",
        ).model_copy(
            update={"source_agent": agent.agent_id, "sender": Actor(login=self.bot_login, id=0, type="Bot")}
        )
