"""Events reaching running pipelines: the outbox's :class:`~squadron.domain.effects.SteerPipelineRuns`
(docs/pipelines.md, "Reactive handlers at run time").

For each run recorded on the event's issue or pull request
(:class:`~squadron.registry_ports.PipelineRunIndex`) whose version handles the event, the run is
read from Step Functions (DescribeExecution, and the newest page of its history), and
:func:`squadron.domain.pipelines.reactions.reaction` says what to do; this module does it:

* a stop answers the tasks the run may be waiting on with ``Squadron.Cancelled`` (a compiled
  stage catches it to the run's cancel end; a task already over answers "gone") and then stops
  the execution and its child runs (StopExecution ends a run at once on AWS; moto's does not end
  one waiting on a task token, which the answers do);
* a restart starts the new execution under its deterministic name (Step Functions starts a name
  once), its ``trigger`` the run's with the effect's event facts laid over (a push's new head),
  and records it, so the next event reaches it;
* a notification is a comment under a key of the effect and the run (a retry looks it up first).

A run found over (or stopped here) is forgotten once its steps are done, so the next event reads
only the runs that may still be going (a retry in between finds it again and carries out the rest:
its stop is recognised by the cause, which names the effect's key). A run not seen over is never
forgotten: one Step Functions does not know (yet) is left to its record's expiry, and a record
written again since it was read is kept (:meth:`~squadron.registry_ports.PipelineRunIndex.forget_run`).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime

from squadron.adapters.step_functions import Pipelines
from squadron.domain.effects import SteerPipelineRuns
from squadron.domain.pipeline_wire import RUN_CANCELLED, StageFailed
from squadron.domain.pipelines.reactions import (
    CommentOnRun,
    Leave,
    RunRecord,
    RunState,
    StartRestart,
    StopRun,
    over,
    reaction,
    run_state,
    to_steer,
)
from squadron.domain.pipelines.work import AUTHOR
from squadron.ports import RouterGitHub
from squadron.registry_ports import PipelineRunIndex

logger = logging.getLogger(__name__)

#: The newest history events read of a run (where it is, what it waits on): one page.
HISTORY_READ = 200


def _now() -> datetime:
    return datetime.now(UTC)


def run_key(key: str, execution_arn: str) -> str:
    """The key of what an effect does to one run (a comment's marker)."""
    return hashlib.sha256(f"{key}\x00{execution_arn}".encode()).hexdigest()[:24]


class PipelineSteering:
    """Carries out :class:`SteerPipelineRuns` effects against Step Functions and GitHub."""

    def __init__(
        self, pipelines: Pipelines, index: PipelineRunIndex, *, clock: Callable[[], datetime] = _now
    ) -> None:
        self.pipelines = pipelines
        self.index = index
        self.clock = clock

    def steer(
        self, effect: SteerPipelineRuns, key: str, github: RouterGitHub, look_since: datetime | None
    ) -> list[str]:
        """Every recorded run of the effect's subject that handles its event, steered; what was done."""
        done: list[str] = []
        for run in to_steer(self.index.runs_of(effect.repo_id, effect.number), effect.event, effect.delivery):
            seen = self._seen(run)
            steps = reaction(
                run, seen, event=effect.event, delivery=effect.delivery, key=key, trigger=effect.trigger
            )
            for step in steps:
                match step:
                    case StopRun(execution_arn=arn, tokens=tokens, cause=cause):
                        for token in tokens:
                            self.pipelines.answer(token, StageFailed.of(RUN_CANCELLED, cause))
                        self.pipelines.stop(arn, error=RUN_CANCELLED, cause=cause)
                        done.append(f"stopped {arn}")
                    case StartRestart():
                        started = self.pipelines.start(step.version_arn, step.name, step.input)
                        self.index.record_run(
                            RunRecord(
                                repo_id=run.repo_id,
                                number=run.number,
                                pipeline=run.pipeline,
                                execution_arn=started.execution_arn,
                                version_arn=run.version_arn,
                                started_at=self.clock(),
                                on_events=run.on_events,
                                stages=run.stages,
                            )
                        )
                        done.append(
                            f"restarted {run.execution_arn} from {step.start_from}: {started.execution_arn}"
                        )
                    case CommentOnRun(number=number, body=body):
                        marker = run_key(key, run.execution_arn)
                        inst, repo = effect.installation_id, effect.repo_full_name
                        if look_since is None or not github.find_comment(
                            inst, repo, number, marker, look_since
                        ):
                            github.comment(inst, repo, number, body, AUTHOR, key=marker)
                        done.append(f"notified #{number}")
                    case Leave(why=why):
                        logger.info("%s on %s: %s", effect.event, run.execution_arn, why)
            found_over = over(seen) or any(isinstance(s, StopRun) for s in steps)
            if found_over and not self.index.forget_run(run):
                logger.info("%s: recorded again since it was read; kept", run.execution_arn)
        return done

    def _seen(self, run: RunRecord) -> RunState | None:
        view = self.pipelines.describe(run.execution_arn)
        if view is None:
            return None
        description = {
            "status": view.status,
            "error": view.error,
            "cause": view.cause,
            "input": json.dumps(view.input),
        }
        return run_state(description, self.pipelines.history(run.execution_arn, HISTORY_READ), run.stages)
