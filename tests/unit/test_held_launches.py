"""A launch ECS refuses (a Fargate vCPU quota, no capacity) is held, not failed: the event is done,
the decision stands, and the reconciler tries the launch again with back-off."""

from __future__ import annotations

from datetime import timedelta

import pytest

from squadron.adapters.ecs import TaskLaunchError
from squadron.domain.agents import AgentStatus, launch_retry_delay
from squadron.domain.metrics import routing_points
from squadron.domain.reconcile import Liveness, rescues
from squadron.domain.repo_config.models import BreakerLimits
from squadron.shell.dispatch import Dispatcher
from tests.support.world import World

A38 = "1-38-feat-dev"
QUOTA = "RunTask for 1-38-feat-dev failed: You've reached the limit on the number of vCPUs you can run concurrently"


class RefusingLauncher:
    """ECS refusing the next ``refusals`` launches, then starting tasks."""

    def __init__(self, world: World, refusals: int) -> None:
        self.world = world
        self.refusals = refusals

    def launch(self, agent_id: str, purpose: str, token: str, secret: str) -> str:
        if self.refusals:
            self.refusals -= 1
            raise TaskLaunchError(QUOTA)
        return self.world.launcher.launch(agent_id, purpose, token, secret)

    def find(self, token: str) -> str | None:
        return self.world.launcher.find(token)

    def stop(self, task_arn: str, reason: str) -> None:
        self.world.launcher.stop(task_arn, reason)


@pytest.mark.parametrize(
    ("failures", "delay"),
    [(0, 0), (1, 5), (2, 10), (3, 20), (4, 40), (5, 60), (12, 60), (1000, 60)],
)
def test_the_back_off_doubles_up_to_an_hour(failures: int, delay: int) -> None:
    assert launch_retry_delay(failures) == timedelta(minutes=delay)


def test_a_refused_launch_is_held_counted_and_retried_until_it_starts() -> None:
    world = World()
    world.router.launcher = RefusingLauncher(world, refusals=2)
    summary = Dispatcher(world.router).handle(world.events.assigned(38).to_message())
    # The event is done (nothing goes back to the queue); the decision stands.
    agent = world.agent(A38)
    assert (agent.status, agent.pending_launch, agent.task_arn) == (AgentStatus.CREATED, f"{A38}-g1-l1", None)
    assert (agent.launch_failures, agent.launch_error) == (1, QUOTA)
    assert summary["held"] == [A38]
    assert [p.name for p in routing_points(summary) if p.name == "AgentLaunchesHeld"] == ["AgentLaunchesHeld"]

    liveness = Liveness(BreakerLimits(), timedelta(minutes=10))
    failed_at = agent.launch_failed_at
    assert failed_at is not None
    assert (
        rescues([agent], now=failed_at + timedelta(minutes=4), liveness=lambda a: liveness, running=None)
        == []
    )
    world.now = failed_at + timedelta(minutes=5)  # the reconciler's command is routed then
    (retry,) = rescues([agent], now=world.now, liveness=lambda a: liveness, running=None)
    world.send(retry)  # refused again: held, a longer wait
    agent = world.agent(A38)
    assert (agent.launch_failures, agent.pending_launch) == (2, f"{A38}-g1-l1")
    assert agent.counters.recoveries == 0  # a refused launch is not a death

    failed_at = agent.launch_failed_at
    assert failed_at is not None
    world.now = failed_at + timedelta(minutes=10)
    (retry,) = rescues([agent], now=world.now, liveness=lambda a: liveness, running=None)
    world.send(retry)  # ECS has room now
    agent = world.agent(A38)
    assert agent.pending_launch is None and agent.task_arn is not None
    assert (agent.launch_failures, agent.launch_error, agent.launch_failed_at) == (0, None, None)
    assert world.launcher.tasks_for(A38) == [agent.task_arn]  # one task in the end
