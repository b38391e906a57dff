"""Publishing a repository's pipelines and starting their runs (docs/pipelines.md, "When a run starts").

:meth:`PipelineRuns.publish` compiles a repository's pipelines (its default branch's
``.squadron/config.yaml``) and keeps each state machine in step, sub-pipelines first
(:func:`~squadron.domain.pipelines.publishing.publish_order`): an unchanged definition publishes
nothing, a changed one a new version (a running execution stays on the version it started with).
A pipeline that does not compile is a problem naming the repository and the pipeline, and the
pipelines that run it are left as they were; the rest are published. The reconciler calls it on
each run (:mod:`squadron.shell.reconciler`).

:meth:`PipelineRuns.start` carries out a :class:`~squadron.domain.effects.StartPipelineRun` from
the router's outbox: it publishes what the run needs when that is not yet published or has
changed (the first trigger of a repository's pipeline publishes it, as a repository's EFS access
point is made at its first launch), then starts the run on that version under the effect's
name: a retry, or the same delivery handled twice, is the same execution. With an ``index``, the
run is recorded on its issue or pull request with its version's ``on_events``, and
:attr:`PipelineRuns.steering` carries out the events that reach it
(:mod:`squadron.shell.pipeline_steering`).

A pipeline removed from the configuration keeps its state machine: runs that started on one of
its versions go on to their end (deleting it would fail them); no event starts a new one, since
triggers are read from the configuration. The reconciler's report says which are left so.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from squadron.adapters.step_functions import Pipelines, Run
from squadron.domain.domain_events import DomainEvent, Repository
from squadron.domain.effects import StartPipelineRun
from squadron.domain.pipeline_events import run_started
from squadron.domain.pipeline_wire import WireError, run_input
from squadron.domain.pipelines.compile import CompileError, compile_pipeline
from squadron.domain.pipelines.models import Pipeline
from squadron.domain.pipelines.publishing import children, needed, publish_order
from squadron.domain.pipelines.reactions import RunRecord, handlers_of
from squadron.registry_ports import PipelineRunIndex
from squadron.shell.pipeline_steering import PipelineSteering

logger = logging.getLogger(__name__)


@dataclass
class Published:
    """What one publication did: each pipeline's version, what changed, what could not be done."""

    #: The published version ARN of each pipeline now in step.
    versions: dict[str, str] = field(default_factory=dict)
    #: "<repository>: pipeline <name> <created|published> (<version>)" per change.
    lines: list[str] = field(default_factory=list)
    #: "<repository>: pipeline <name> not published: <why>".
    problems: list[str] = field(default_factory=list)


class PipelineRuns:
    """The pipelines of one deployment: compiled with events.fifo as their tasks' queue."""

    def __init__(
        self,
        pipelines: Pipelines,
        *,
        queue_url: str,
        index: PipelineRunIndex | None = None,
        events: Callable[[DomainEvent], bool] | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.pipelines = pipelines
        self.queue_url = queue_url
        #: Where each started run is recorded, so events reach it (None: runs are not steered).
        self.index = index
        self.steering = PipelineSteering(pipelines, index) if index is not None else None
        #: Stores a run's ``pipeline.run_started.v1`` once (the registry's ``record_event``);
        #: None: no event (docs/pipelines.md, "Events").
        self.events = events
        self.clock = clock

    def publish(
        self,
        repository_id: int,
        repository: str,
        pipelines: Mapping[str, Pipeline],
        names: list[str] | None = None,
    ) -> Published:
        """Keep ``names`` (every pipeline when None) and their sub-pipelines in step with ``pipelines``."""
        done = Published()
        order = publish_order(pipelines, names)
        for name in sorted(set(pipelines if names is None else names) - set(order)):
            done.problems.append(
                f"{repository}: pipeline {name!r} not published: it runs a missing sub-pipeline"
            )
        for name in order:
            missing = [child for child in children(pipelines[name]) if child not in done.versions]
            if missing:
                done.problems.append(
                    f"{repository}: pipeline {name!r} not published: sub-pipeline(s) "
                    f"{', '.join(repr(m) for m in missing)} not published"
                )
                continue
            try:
                compiled = compile_pipeline(
                    name,
                    pipelines,
                    queue_url=self.queue_url,
                    repository_id=repository_id,
                    children={child: done.versions[child] for child in children(pipelines[name])},
                )
            except (CompileError, WireError) as exc:
                done.problems.append(f"{repository}: pipeline {name!r} not published: {exc}")
                continue
            held = self.pipelines.ensure(repository_id, name, compiled.text)
            done.versions[name] = held.version_arn
            if held.outcome != "unchanged":
                done.lines.append(f"{repository}: pipeline {name!r} {held.outcome} ({held.version_arn})")
        return done

    def left(self, repository_id: int, pipelines: Mapping[str, Pipeline]) -> list[str]:
        """The repository's state machines whose pipeline is no longer configured (kept for their runs)."""
        configured = {self.pipelines.state_machine_arn(repository_id, name) for name in pipelines}
        return sorted(arn for arn in self.pipelines.machines(repository_id) if arn not in configured)

    def start(
        self,
        effect: StartPipelineRun,
        pipelines: Mapping[str, Pipeline],
        *,
        correlation_id: str | None = None,
    ) -> Run | None:
        """Start ``effect``'s run on its pipeline's version as configured now; None when the
        pipeline is no longer configured or cannot be published (logged: nothing to retry).

        The run's ``pipeline.run_started.v1`` (``correlation_id``: the delivery that started it)
        is stored once per execution, also when a retry finds the run already started (the
        attempt that started it may have stopped before storing it)."""
        if effect.pipeline not in pipelines:
            logger.warning(
                "%s: pipeline %r is no longer configured; run %s not started",
                effect.repo_full_name,
                effect.pipeline,
                effect.name,
            )
            return None
        published = self.publish(
            effect.repo_id, effect.repo_full_name, pipelines, needed(pipelines, effect.pipeline)
        )
        for line in published.lines:
            logger.info("%s", line)
        version = published.versions.get(effect.pipeline)
        if version is None:
            logger.warning(
                "run %s not started: %s", effect.name, "; ".join(published.problems) or "not published"
            )
            return None
        run = self.pipelines.start(
            version,
            effect.name,
            run_input(
                effect.repo_id,
                effect.issue_number,
                effect.data,
                repository=effect.repo_full_name,
                installation_id=effect.installation_id,
            ),
        )
        if self.index is not None:
            pipeline = pipelines[effect.pipeline]
            self.index.record_run(
                RunRecord(
                    repo_id=effect.repo_id,
                    number=effect.issue_number,
                    pipeline=effect.pipeline,
                    execution_arn=run.execution_arn,
                    version_arn=version,
                    started_at=datetime.now(UTC),
                    on_events=handlers_of(pipeline),
                    stages=tuple(stage.id for stage in pipeline.stages),
                )
            )
        logger.info(
            "%s: pipeline %r run %s %s",
            effect.repo_full_name,
            effect.pipeline,
            run.execution_arn,
            run.outcome,
        )
        if self.events is not None:
            self.events(
                run_started(
                    pipeline=effect.pipeline,
                    execution_arn=run.execution_arn,
                    version_arn=version,
                    repository=Repository(id=effect.repo_id, full_name=effect.repo_full_name),
                    installation=effect.installation_id,
                    issue=effect.issue_number,
                    correlation_id=correlation_id or effect.name,
                    at=self.clock(),
                )
            )
        return run
