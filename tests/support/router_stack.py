"""The router as most tests and the benchmarks wire it, and an agent at the gateway's door on moto.

- :func:`router_over`: a :class:`RouterService` over a registry, with the usual stand-ins (a
  GitHub where alice, who assigns the App, has write access; the default routing policy; a
  fixed clock), each replaceable.
- :func:`routed_on_moto`: on moto (call inside ``mock_aws``), a fresh registry and
  events.fifo, the router over them given some events (the App's assignment of an issue);
  its :meth:`~RoutedOnMoto.at_the_door` puts that issue's dev agent at the agent gateway's
  door with its launch begun: what an agent task's host asks first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from mypy_boto3_sqs import SQSClient

from squadron.adapters.dynamo_registry import DynamoRegistry
from squadron.adapters.sqs import SqsEventQueue
from squadron.agent.door import Door
from squadron.domain.agents import AgentRecord
from squadron.domain.events import EventEnvelope
from squadron.domain.routing import RoutingPolicy
from squadron.shell.gateway import AgentGateway
from squadron.shell.router import RouterService
from tests.support.aws import registry_and_queue
from tests.support.events import T0, Events
from tests.support.fake_registry import FakeLauncher, FakeRouterGitHub
from tests.support.gateway import door_of, gateway_for
from tests.support.github_fake import FakeGitHub

#: Who has write access on the usual stand-in of GitHub: alice assigns the App.
WRITERS = ("alice",)


def router_over(
    registry: Any,
    launcher: Any = None,
    *,
    github: Any = None,
    writers: Iterable[str] = WRITERS,
    policy: RoutingPolicy | None = None,
    clock: Callable[[], datetime] = lambda: T0,
    **wiring: Any,
) -> RouterService:
    """The router over ``registry``: ``github`` (else a stand-in where ``writers`` have write
    access), ``policy`` for every event (else the default), ``clock``, and any other of
    :class:`RouterService`'s wiring (``queue``, ``memory``, ``merge_gate``...)."""
    routing = policy if policy is not None else RoutingPolicy()
    return RouterService(
        registry=registry,
        launcher=launcher if launcher is not None else FakeLauncher(),
        github=github if github is not None else FakeRouterGitHub(dict.fromkeys(writers, "write")),
        policies=lambda _event: routing,
        clock=clock,
        **wiring,
    )


@dataclass(frozen=True)
class AtTheDoor:
    """An agent gateway and one dev agent through its door, its launch begun."""

    gateway: AgentGateway
    agent: AgentRecord
    door: Door


@dataclass(frozen=True)
class RoutedOnMoto:
    """A moto registry and events.fifo, and the router over them."""

    registry: DynamoRegistry
    sqs: SQSClient
    queue_url: str
    launcher: FakeLauncher
    router: RouterService
    events: Events
    clock: Callable[[], datetime]

    def at_the_door(self, issue: int = 38, **gateway_wiring: Any) -> AtTheDoor:
        """``issue``'s dev agent at the door of a gateway over GitHub's stand-in (and any other of
        :func:`tests.support.gateway.gateway_for`'s wiring: ``memory``...), its launch begun."""
        queue = SqsEventQueue(self.queue_url, client=self.sqs)
        gateway = gateway_for(self.registry, queue, FakeGitHub(), clock=self.clock, **gateway_wiring)
        agent = self.registry.get_agent(f"1-{issue}-feat-dev")
        assert agent is not None
        door = door_of(gateway, self.launcher, agent)
        door.begin()
        return AtTheDoor(gateway, agent, door)


def routed_on_moto(
    *events_of: Callable[[Events], EventEnvelope], clock: Callable[[], datetime] = lambda: T0
) -> RoutedOnMoto:
    """A fresh registry and events.fifo on moto (call inside ``mock_aws``), the router over them
    given the events ``events_of`` make, in octo/repo (:func:`assigned`: the App assigned to an
    issue by alice)."""
    registry, sqs, url = registry_and_queue()
    launcher = FakeLauncher()
    router = router_over(registry, launcher, clock=clock)
    events = Events(full_name="octo/repo")
    for make in events_of:
        router.process(make(events))
    return RoutedOnMoto(registry, sqs, url, launcher, router, events, clock)


def assigned(issue: int = 38) -> Callable[[Events], EventEnvelope]:
    """The App assigned to ``issue`` (by alice): its dev agent starts."""
    return lambda events: events.assigned(issue)
