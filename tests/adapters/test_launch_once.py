"""A decided launch starts one task, on the real parts: the DynamoDB registry and the ECS launcher
on moto, carried out by :func:`squadron.shell.launching.carry_out_launch` by one executor, then
another (a retry, or a second executor inside the first's RunTask).

moto's RunTask ignores the client token (every call starts a task): what keeps the count here is
the protocol, not ECS's idempotency. Each case ends by asking what ECS runs and whether the task
that runs holds the secret the registry accepts (a task armed over would be refused: the agent
would never begin).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

import boto3
import pytest
from moto import mock_aws

from squadron.adapters.dynamo_registry import TABLE_DEFINITION, DynamoRegistry
from squadron.adapters.ecs import EcsTaskLauncher, started_by
from squadron.domain.agents import AgentRecord, RoleKind
from squadron.domain.effects import AgentWrite
from squadron.domain.launches import ARMING_HELD, SECRET_ENV, secret_digest
from squadron.domain.lifecycle.transitions import with_launch
from squadron.shell.launching import Launched, carry_out_launch
from tests.support.aws import agent_compute
from tests.support.events import T0

if TYPE_CHECKING:
    from mypy_boto3_ecs import ECSClient

AGENT = "1-38-feat-dev"
TOKEN = f"{AGENT}-g1-l1"


class Crash(Exception):
    """The executor died here."""


@dataclass
class Stage:
    """One moto account: the registry's table, the agents' cluster, and the first executor's fault."""

    ecs: ECSClient
    registry: DynamoRegistry
    launcher: EcsTaskLauncher
    #: Inside the first executor's RunTask: "before" it leaves, or "after" ECS applied it.
    inside: Callable[[], object] | None = None
    when: Literal["before", "after"] = "before"
    #: The first executor's RunTask answer is lost (it dies once the task is started).
    lose_answer: bool = False
    outcomes: list[Launched] = field(default_factory=list)

    def carry_out(self, now: datetime) -> Launched:
        launched = carry_out_launch(
            self.registry, self.launcher, AGENT, purpose="start", token=TOKEN, now=now
        )
        self.outcomes.append(launched)
        return launched

    def running(self) -> list[str]:
        return self.ecs.list_tasks(cluster="squadron", desiredStatus="RUNNING")["taskArns"]

    def all_tasks(self) -> list[str]:
        return self.ecs.list_tasks(cluster="squadron")["taskArns"]

    def agent(self) -> AgentRecord:
        record = self.registry.get_agent(AGENT)
        assert record is not None
        return record

    def secret_of(self, task_arn: str) -> str:
        (task,) = self.ecs.describe_tasks(cluster="squadron", tasks=[task_arn])["tasks"]
        environment = task["overrides"]["containerOverrides"][0]["environment"]
        return next(e["value"] for e in environment if e["name"] == SECRET_ENV)


@pytest.fixture
def stage() -> Iterator[Stage]:
    with mock_aws():
        compute = agent_compute()
        dynamodb = boto3.client("dynamodb")
        dynamodb.create_table(TableName="registry", **TABLE_DEFINITION)
        registry = DynamoRegistry("registry", client=dynamodb)
        fresh = AgentRecord(
            agent_id=AGENT,
            role="feat-dev",
            kind=RoleKind.DEV,
            repo_id=1,
            repo_full_name="octo/app",
            installation_id=77,
            issue_number=38,
            branch="feat/issue-38",
            created_at=T0,
            updated_at=T0,
            generation_started_at=T0,
        )
        decided = with_launch(fresh, "delivery-1")
        assert decided.pending_launch == TOKEN
        registry.put_agent(AgentWrite(decided, None))
        ecs = boto3.client("ecs")
        launcher = EcsTaskLauncher(
            cluster=compute.cluster_arn,
            task_definition=compute.task_definition,
            container_name="agent",
            subnets=[compute.subnet],
            security_groups=[compute.security_group],
            client=ecs,
        )
        stage = Stage(ecs, registry, launcher)
        calls = {"RunTask": 0}

        def before(**_: Any) -> None:
            calls["RunTask"] += 1
            if calls["RunTask"] == 1 and stage.inside is not None and stage.when == "before":
                stage.inside()

        def after(**_: Any) -> None:
            if calls["RunTask"] != 1:
                return
            if stage.inside is not None and stage.when == "after":
                stage.inside()
            if stage.lose_answer:
                raise Crash("the executor died before RunTask's answer reached it")

        ecs.meta.events.register("before-call.ecs.RunTask", before)
        ecs.meta.events.register("after-call.ecs.RunTask", after)
        yield stage


LATER = timedelta(seconds=5)  # a second attempt while the first one's arming holds
ABANDONED = ARMING_HELD + timedelta(seconds=1)  # the first executor is gone by then


@dataclass(frozen=True)
class Case:
    name: str
    #: The first executor dies once its task started (its RunTask answer lost)...
    lose_answer: bool = False
    #: ...or a second executor runs inside its RunTask ("before" it leaves, "after" it applied).
    beside: Literal["before", "after"] | None = None
    #: The first task stops before anyone confirmed it (it crashed at once).
    first_stops: bool = False
    #: When the retry comes (after the first attempt), if there is one.
    retry_after: timedelta | None = None
    #: What the attempts did (the first's last), and how many tasks ECS started in all.
    outcomes: tuple[str, ...] = ()
    started: int = 1


CASES = [
    Case("one attempt", outcomes=("started",)),
    Case(
        "RunTask's answer lost, retried at once", lose_answer=True, retry_after=LATER, outcomes=("adopted",)
    ),
    Case(
        "RunTask's answer lost, retried later", lose_answer=True, retry_after=ABANDONED, outcomes=("adopted",)
    ),
    Case("a second executor before RunTask leaves", beside="before", outcomes=("left", "started")),
    Case("a second executor after RunTask applied", beside="after", outcomes=("adopted", "started")),
    Case(
        "the first task stopped unconfirmed, retried later",
        lose_answer=True,
        first_stops=True,
        retry_after=ABANDONED,
        outcomes=("started",),
        started=2,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_launch_starts_one_task_holding_the_arming_that_stands(stage: Stage, case: Case) -> None:
    first_at = T0 + timedelta(hours=1)
    stage.lose_answer = case.lose_answer
    if case.beside is not None:
        stage.when = case.beside
        stage.inside = lambda: stage.carry_out(first_at + timedelta(seconds=1))
    try:
        stage.carry_out(first_at)
    except Crash:
        assert case.lose_answer
        assert stage.agent().pending_launch == TOKEN  # started, never confirmed
        if case.first_stops:
            (first,) = stage.running()
            stage.launcher.stop(first, "it crashed at once")
    if case.retry_after is not None:
        stage.carry_out(first_at + case.retry_after)

    assert tuple(o.outcome for o in stage.outcomes) == case.outcomes
    assert len(stage.all_tasks()) == case.started
    (running,) = stage.running()  # one task runs, whoever started it
    agent = stage.agent()
    assert (agent.pending_launch, agent.task_arn) == (None, running)
    # It holds the secret the registry accepts: its calls to the framework are answered.
    assert secret_digest(stage.secret_of(running)) == agent.launch_secret_hash


def test_a_launch_armed_just_now_is_left_to_its_executor_then_started_once_it_is_gone(stage: Stage) -> None:
    """The first executor died after arming, before RunTask left: a retry while the arming holds
    starts nothing (that executor might still be starting it); one after it starts the task."""
    first_at = T0 + timedelta(hours=1)

    def die() -> None:
        raise Crash("died before RunTask left")

    stage.inside = die
    with pytest.raises(Crash):
        stage.carry_out(first_at)
    stage.inside = None
    assert stage.all_tasks() == []
    assert stage.carry_out(first_at + LATER).outcome == "left"
    assert stage.all_tasks() == [] and stage.agent().pending_launch == TOKEN
    assert stage.carry_out(first_at + ABANDONED).outcome == "started"
    (running,) = stage.all_tasks()
    agent = stage.agent()
    assert agent.task_arn == running
    assert secret_digest(stage.secret_of(running)) == agent.launch_secret_hash


def test_a_task_is_found_by_its_launch_and_only_while_it_runs(stage: Stage) -> None:
    assert stage.launcher.find(TOKEN) is None
    arn = stage.launcher.launch(AGENT, "start", TOKEN, "s" * 43)
    other = stage.launcher.launch(AGENT, "start", f"{AGENT}-g1-l2", "t" * 43)
    assert stage.launcher.find(TOKEN) == arn and stage.launcher.find(f"{AGENT}-g1-l2") == other
    stage.launcher.stop(arn, "done")
    assert stage.launcher.find(TOKEN) is None
    assert started_by("1-38-feat.dev-g1-l1") == "1-38-feat_dev-g1-l1"  # ECS's alphabet
