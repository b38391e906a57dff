"""The agent gateway as tests wire it: the real service over a registry, a queue and the GitHub fake,
and doors holding the secret the (fake) launcher handed each task."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from squadron.adapters.github.auth import GitHubApp
from squadron.adapters.github.http import GitHubHttp
from squadron.adapters.metrics import RecordedMetrics
from squadron.agent.door import Door, Transport
from squadron.config import load_directory
from squadron.config.parse import SquadronConfig
from squadron.domain.agents import AgentRecord
from squadron.domain.launches import HANDOVER_PATIENCE
from squadron.domain.retention import DEFAULT_RETENTION_DAYS
from squadron.ports import ArtifactStore, EventQueue, MemoryStore, RetroStore
from squadron.shell.gateway import AgentGateway, GatewayRegistry
from squadron.shell.memory import Memory
from tests.support.fake_memory import FakeMemory
from tests.support.fake_registry import FakeLauncher
from tests.support.github_fake import FakeGitHub, app_private_key

ROOT = Path(__file__).resolve().parents[2]


class DictSecrets:
    """Secrets Manager as a dict: what was asked for is remembered (what a task got)."""

    def __init__(self, values: Mapping[str, str] | None = None) -> None:
        self.values = dict(values or {})
        self.asked: list[str] = []

    def get(self, secret_id: str) -> str:
        self.asked.append(secret_id)
        if secret_id not in self.values:
            raise KeyError(secret_id)
        return self.values[secret_id]


def gateway_for(
    registry: GatewayRegistry,
    queue: EventQueue,
    github: FakeGitHub | None,
    *,
    app: GitHubApp | None = None,
    clock: Callable[[], datetime],
    config: SquadronConfig | None = None,
    secrets: DictSecrets | None = None,
    copilot_token_secret: str | None = None,
    metrics: RecordedMetrics | None = None,
    memory: MemoryStore | None = None,
    retros: RetroStore | None = None,
    artifacts: ArtifactStore | None = None,
    state_retention: timedelta | None = None,
) -> AgentGateway:
    """The gateway over ``github`` (the recording fake), or over ``app`` (e.g. the sandbox's)."""
    if app is None:
        assert github is not None, "a gateway needs GitHub: the fake or an App"
        private, _ = app_private_key()
        app = GitHubApp(
            app_id=42,
            http=GitHubHttp(transport=github.transport(), sleep=lambda s: None),
            private_key=lambda: private,
            clock=clock,
        )
    loaded = config or load_directory(ROOT / ".squadron")
    store = memory if memory is not None else FakeMemory()
    return AgentGateway(
        registry=registry,
        app=app,
        queue=queue,
        secrets=secrets or DictSecrets(),
        config_for=lambda agent: loaded,
        agent_metrics=metrics or RecordedMetrics(),
        copilot_token_secret=copilot_token_secret,
        memory=Memory(store, clock=clock),
        retros=retros if retros is not None else (store if isinstance(store, FakeMemory) else None),
        artifacts=artifacts if artifacts is not None else (store if isinstance(store, FakeMemory) else None),
        state_retention=state_retention
        if state_retention is not None
        else timedelta(days=DEFAULT_RETENTION_DAYS),
        clock=clock,
    )


def in_process(gateway: AgentGateway) -> Transport:
    """A transport that serves each call as the Lambda would (through JSON both ways)."""

    def call(request: dict[str, Any]) -> dict[str, Any]:
        answer: dict[str, Any] = json.loads(json.dumps(gateway.serve(json.loads(json.dumps(request))).body))
        return answer

    return call


def door_of(
    gateway: AgentGateway,
    launcher: FakeLauncher,
    agent: AgentRecord,
    *,
    secret: str | None = None,
    launch_token: str | None = None,
    transport: Transport | None = None,
    pause: Callable[[float], object] | None = None,
) -> Door:
    """The door the task of ``agent``'s latest launch holds (its secret from the launcher).

    ``launch_token`` names another (earlier) launch: a task that was replaced since.
    ``transport``: how its calls reach the gateway (:func:`in_process` by default).
    ``pause``: how its :meth:`~squadron.agent.door.Door.begin` waits for a lease another task
    holds; without one it does not wait (the gateway's ``lease_held`` is raised at once).
    """
    return Door(
        transport or in_process(gateway),
        agent_id=agent.agent_id,
        launch_token=launch_token or agent.launch_token,
        secret=secret if secret is not None else launcher.secrets[agent.launch_token],
        clock=gateway.clock,
        pause=pause or _no_pause,
        patience=HANDOVER_PATIENCE if pause is not None else timedelta(0),
    )


def _no_pause(seconds: float) -> None:
    raise AssertionError(f"the door waited {seconds} s with no patience")
