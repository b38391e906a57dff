"""Where a pipeline's task is carried out: the repository its run was started for
(docs/pipelines.md, "What the router carries out").

A task names its repository by id only. The router started the run (or its parent) with the
repository's full name and installation in the run's input
(:func:`~squadron.domain.pipeline_wire.run_input`); :class:`RunRepositories` reads them back from
the execution the task came from (DescribeExecution, which the router may call on its
deployment's executions), once per execution. Nothing of the task message itself is trusted for
this: the execution is the one its ARN names, checked first to be one of the repository's own
state machines (:func:`~squadron.domain.pipeline_wire.origin_problem`), and its input must name
the same repository id.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from squadron.adapters.step_functions import Pipelines, RunView
from squadron.adapters.webhooks import Webhooks
from squadron.domain.domain_events import DomainEvent
from squadron.domain.pipeline_wire import PipelineTask, run_repository
from squadron.domain.pipelines.work import Where
from squadron.domain.routing import RoutingPolicy
from squadron.ports import Registry
from squadron.registry_ports import HumanWaits, StageWaits, WriteClaims
from squadron.shell.agent_stages import AgentStages
from squadron.shell.human_stages import HumanStages, PermissionSource
from squadron.shell.outbox import OutboxExecutor
from squadron.shell.pipeline_facts import ClientFor, GitHubFacts
from squadron.shell.pipelines import PipelineTasks

#: Executions remembered by one router process (a warm Lambda answers a run's tasks again).
KEEP = 256


class RunReader(Protocol):
    """:class:`squadron.adapters.step_functions.Pipelines`."""

    def describe(self, execution_arn: str) -> RunView | None: ...


class RunRepositories:
    """``task -> Where`` from the task's execution's input (None: not known, the task is refused
    with that reason)."""

    def __init__(self, runs: RunReader, *, keep: int = KEEP) -> None:
        self.runs = runs
        self.keep = keep
        self._known: OrderedDict[str, Where] = OrderedDict()

    def __call__(self, task: PipelineTask) -> Where | None:
        arn = task.execution_arn
        known = self._known.get(arn)
        if known is not None:
            self._known.move_to_end(arn)
            return known
        view = self.runs.describe(arn)
        found = run_repository(task.repository_id, view.input) if view is not None else None
        if found is None:
            return None
        where = Where(*found)
        self._known[arn] = where
        while len(self._known) > self.keep:
            self._known.popitem(last=False)
        return where


class PipelineStore(WriteClaims, HumanWaits, StageWaits, Protocol):
    """What the router keeps of pipeline tasks in the registry: each task's claimed entry and kept
    answer, the human stages' waits and the agent stages' tokens
    (:class:`squadron.adapters.dynamo_registry.DynamoRegistry`)."""


def carrying_out(
    pipelines: Pipelines,
    *,
    outbox: Callable[[], OutboxExecutor],
    store: PipelineStore | None,
    github: ClientFor,
    events: Callable[[DomainEvent], bool] | None = None,
    groups: Callable[[Where], Mapping[str, Sequence[str]]] | None = None,
    permission: PermissionSource | None = None,
    bot_login: str = "",
    registry: Registry | None = None,
    policy: Callable[[PipelineTask, Where], RoutingPolicy] | None = None,
) -> PipelineTasks:
    """The router's :class:`PipelineTasks` with what carrying tasks out needs: the router's outbox,
    the registry's keyed claims and human waits, GitHub through the App, the webhook caller, each
    run's repository, and the stage events' store. Without ``store`` every task is answered
    ``Squadron.StageRejected``; without ``groups`` and ``permission`` a human stage is, and without
    ``registry`` and ``policy`` (the repository's routing policy now) an agent stage is."""
    if store is None:
        return PipelineTasks(pipelines, prefix=pipelines.prefix, events=events)
    humans = (
        HumanStages(
            pipelines, store, groups=groups, permission=permission, bot_login=bot_login, events=events
        )
        if groups is not None and permission is not None
        else None
    )
    agents = (
        AgentStages(registry=registry, waits=store, answers=pipelines, policy=policy, events=events)
        if registry is not None and policy is not None
        else None
    )
    return PipelineTasks(
        pipelines,
        prefix=pipelines.prefix,
        outbox=outbox,
        claims=store,
        facts=GitHubFacts(github, bot_login=bot_login or None, permission=permission),
        webhooks=Webhooks(),
        where_for=RunRepositories(pipelines),
        humans=humans,
        events=events,
        agents=agents,
        runs=pipelines,
    )
