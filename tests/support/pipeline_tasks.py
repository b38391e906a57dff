"""The router's pipeline tasks over moto's Step Functions (tests/support/step_functions.py) and a
router wired to fakes (tests/support/world.py), as the pipeline tests wire them.

- :func:`pipeline_tasks`: a :class:`~squadron.shell.pipelines.PipelineTasks` answering on the
  stack's Step Functions, claiming in the world's registry, on the world's clock; the router's own
  outbox and ``octo/repo`` (installation 77) for every run unless the test names others.
- :func:`agent_stages`: its agent stages, putting roles to work in the world's registry and
  answering on Step Functions under the world's policy (or the one ``policy`` reads).
- :func:`outbox_over`: an outbox over the world's registry, launcher and GitHub on the world's
  clock as it stands (the router's own ticks it), for tests that hand it another GitHub or a
  merge gate (made anew for each outbox, as the router makes its own).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from squadron.domain.pipelines.work import Where
from squadron.domain.routing import RoutingPolicy
from squadron.shell.agent_stages import AgentStages
from squadron.shell.merge_gate import MergeGate
from squadron.shell.outbox import OutboxExecutor
from squadron.shell.pipelines import FactsReader, PipelineTasks
from tests.support.step_functions import PREFIX, Stack
from tests.support.world import World


def agent_stages(
    stack: Stack, world: World, policy: Callable[[], RoutingPolicy] | None = None
) -> AgentStages:
    return AgentStages(
        registry=world.registry,
        waits=world.registry,
        answers=stack.pipelines,
        policy=lambda _task, _where: policy() if policy is not None else world.policy,
        clock=lambda: world.now,
    )


def pipeline_tasks(
    stack: Stack,
    world: World,
    *,
    facts: FactsReader | None,
    outbox: Callable[[], OutboxExecutor] | None = None,
    where: Callable[[int], Where | None] | None = None,
    agents: AgentStages | None = None,
    **more: Any,
) -> PipelineTasks:
    if where is None and "where_for" not in more:
        where = lambda _repository_id: Where("octo/repo", 77)  # noqa: E731
    return PipelineTasks(
        stack.pipelines,
        prefix=PREFIX,
        outbox=outbox if outbox is not None else world.router._outbox,
        claims=world.registry,
        facts=facts,
        where=where,
        clock=lambda: world.now,
        agents=agents,
        **more,
    )


def outbox_over(
    world: World, github: Any = None, merge_gate: Callable[[], MergeGate] | None = None
) -> Callable[[], OutboxExecutor]:
    def outbox() -> OutboxExecutor:
        return OutboxExecutor(
            registry=world.registry,
            launcher=world.launcher,
            github=github if github is not None else world.github,
            policies=lambda _event: world.policy,
            clock=lambda: world.now,
            merge_gate=merge_gate() if merge_gate is not None else None,
        )

    return outbox
