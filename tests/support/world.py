"""A router wired to fakes: send envelopes, inspect the registry, launches and GitHub calls."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from squadron.domain.agents import AgentRecord
from squadron.domain.effects import Effect, apply_order
from squadron.domain.events import EventEnvelope
from squadron.domain.routing import RoutingPolicy
from squadron.shell.memory import Memory
from squadron.shell.retrospective import Retrospectives
from squadron.shell.router import RouterService
from tests.support.events import T0, Events, summarize
from tests.support.fake_memory import FakeMemory
from tests.support.fake_registry import FakeLauncher, FakeRegistry, FakeRouterGitHub


class ListQueue(list[EventEnvelope]):
    """events.fifo as a list: what was sent, in order."""

    def send(self, envelope: EventEnvelope) -> str:
        envelope.to_message()  # it must fit on the queue
        self.append(envelope)
        return f"m{len(self)}"


@dataclass
class World:
    policy: RoutingPolicy = field(default_factory=RoutingPolicy)
    registry: FakeRegistry = field(default_factory=FakeRegistry)
    launcher: FakeLauncher = field(default_factory=FakeLauncher)
    github: FakeRouterGitHub = field(
        default_factory=lambda: FakeRouterGitHub({"alice": "write", "bob": "admin"})
    )
    events: Events = field(default_factory=Events)
    now: datetime = T0
    memory_store: FakeMemory = field(default_factory=FakeMemory)

    def __post_init__(self) -> None:
        self.memory = Memory(self.memory_store, clock=lambda: self.now)
        #: What the retrospectives put on events.fifo (the router's own queue stays unwired here).
        self.queued = ListQueue()
        self.router = RouterService(
            registry=self.registry,
            launcher=self.launcher,
            github=self.github,
            policies=lambda _event: self.policy,
            clock=self._clock,
            memory=self.memory,
            retrospectives=Retrospectives(
                history=self.registry,
                store=self.memory_store,
                github=self.github,
                queue=self.queued,
                bot_login=self.policy.bot_login,
                clock=lambda: self.now,
            ),
        )

    def _clock(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now

    def send(self, event: EventEnvelope) -> list[Effect]:
        return list(self.router.process(event).effects)

    def say(self, event: EventEnvelope) -> list[str]:
        """The effects of ``event`` in the order the shell applies them."""
        return summarize(apply_order(self.send(event)))

    def agent(self, agent_id: str) -> AgentRecord:
        record = self.registry.get_agent(agent_id)
        assert record is not None, f"no agent {agent_id}"
        return record
