"""How a running pipeline reacts to an event (``on_events``) — pure (docs/pipelines.md,
"Reactive handlers at run time").

A run is recorded when it starts (:class:`RunRecord`: its execution, the version it runs and that
version's ``on_events``, so a run reacts as the configuration it started with says, as it runs
that configuration's stages). When a webhook event arrives that a writer vouched for
(:mod:`squadron.domain.routing.steering`), the router reads each recorded run of the event's issue
or pull request from Step Functions (:class:`RunState`, from :func:`run_state` of its execution
history) and :func:`reaction` says what to do with it:

* ``cancel`` — answer every task the run may wait on with :data:`~squadron.domain.pipeline_wire.RUN_CANCELLED`
  (a compiled stage catches it to the run's cancel end) and stop the execution (and its child
  runs). Both, because Step Functions' StopExecution ends a run at once while moto's does not end
  one waiting on a task token; whichever comes second finds the run over, harmlessly;
* ``invalidate_and_restart`` — the same stop, then a new execution of the same published version
  (for the same repository and installation, which its tasks are carried out in) that begins at
  ``restart_from`` (``current``: the stage the run is in), with the finished stages' outputs
  except the invalidated ones, the run's loop counts (a restart never resets a bound), its
  context with the handler's ``context`` on top (:func:`with_context`), and as ``trigger`` the
  run's own with the restarting event's facts laid over (:func:`restarted_trigger`: a push's new
  head). Its name is :func:`restart_name` of the triggering delivery and the run, so a
  redelivery, or the outbox's retry, starts it once;
* ``reevaluate_gates`` — a gate is judged when the run reaches it and never waits here, so the
  gate to judge again is one that failed and sent the run round its ``on_fail`` loop: the run is
  restarted at that gate (as above, nothing invalidated). A run not in such a loop is left (its
  gates are judged when it reaches them; a delay's poll judges at its next interval);
* ``notify`` — a comment on the run's issue or pull request (naming the handler's ``target``),
  its message rendered with the handler's ``context`` added to the run's;
* ``wake_agent`` — decided with the event itself, where the issue's agents are known
  (:mod:`squadron.domain.routing.steering`); nothing here.

A run is steered only while it runs, or when it was stopped by this very reaction (a retry that
finds the stop done carries out the rest): a run that ended by itself is left.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import TypeAdapter, ValidationError

from squadron.domain.pipeline_runs import event_detail, json_or_none
from squadron.domain.pipeline_wire import RUN_CANCELLED, execution_name, run_input, run_repository
from squadron.domain.pipelines.asl import state_key
from squadron.domain.pipelines.judge import namespaces
from squadron.domain.pipelines.models import (
    CancelRun,
    InvalidateAndRestart,
    NotifyHandler,
    Pipeline,
    ReactiveHandler,
    ReevaluateGates,
    WakeAgent,
)
from squadron.domain.pipelines.templates import PipelineTemplateError, render

#: The recorded runs of one issue or pull request a reaction looks at, newest first (a
#: repository's pipelines are at most 20; a subject rarely has more than a few running).
MAX_RUNS_PER_SUBJECT = 20
#: The latest tasks whose tokens a stop answers (a parallel stage waits on at most 10 branches).
MAX_TOKENS = 20
#: The handlers that start a new execution part-way: a pipeline with one compiles a restart entry.
RESTARTING = ("invalidate_and_restart", "reevaluate_gates")
#: What a restarted run's ``trigger`` keeps of its own whatever the restarting event says: the
#: repository it runs in and the issue or pull request it follows.
RUN_OWN = ("repository", "number")

_HANDLER: TypeAdapter[Any] = TypeAdapter(ReactiveHandler)


@dataclass(frozen=True)
class RunRecord:
    """A started run, as the router records it (:class:`squadron.registry_ports.PipelineRunIndex`)."""

    repo_id: int
    #: The run's issue or pull request (None: a repository-wide run).
    number: int | None
    pipeline: str
    execution_arn: str
    #: The published version the run executes (a restart starts another run of it).
    version_arn: str
    started_at: datetime
    #: That version's ``on_events``, as configured (event name -> handler, JSON).
    on_events: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: That version's top-level stage ids, in order (what a restart may begin at).
    stages: tuple[str, ...] = ()

    def handler(self, event: str) -> ReactiveHandler | None:
        """The run's handler of ``event`` (None: it has none, or it cannot be read)."""
        raw = self.on_events.get(event)
        if raw is None:
            return None
        try:
            handler: ReactiveHandler = _HANDLER.validate_python(dict(raw))
        except ValidationError:
            return None
        return handler


def handlers_of(pipeline: Pipeline) -> dict[str, dict[str, Any]]:
    """``pipeline.on_events`` as a run's record keeps it."""
    return {
        event: handler.model_dump(mode="json", by_alias=True, exclude_none=True)
        for event, handler in pipeline.on_events.items()
    }


def restarts(pipeline: Pipeline) -> bool:
    """Whether runs of ``pipeline`` may be restarted part-way (its definition has a restart entry)."""
    return any(handler.action in RESTARTING for handler in pipeline.on_events.values())


def could_steer(pipelines: Mapping[str, Pipeline], event: str) -> bool:
    """Whether any configured pipeline handles ``event`` (what makes the router look for runs)."""
    return any(event in pipeline.on_events for pipeline in pipelines.values())


# --- what Step Functions says of a run ----------------------------------------------------------


@dataclass(frozen=True)
class RunState:
    """A run as read from Step Functions: its status, input and where it is (:func:`run_state`)."""

    status: str
    error: str | None
    cause: str | None
    #: The execution's input (``squadron``, ``data``).
    input: Mapping[str, Any]
    #: The stage the run is in (its latest top-level stage state), if any.
    current: str | None = None
    #: The run's state as that stage was entered (``data``, ``counts``, ``timeouts``).
    state: Mapping[str, Any] | None = None
    #: A gate whose ``on_fail`` loop the run is in now (failed, and not judged again since).
    looping_gate: str | None = None
    #: Tokens of the latest tasks the run scheduled (those still waiting among them).
    tokens: tuple[str, ...] = ()
    #: The causes its tasks were failed with :data:`RUN_CANCELLED` (a stop's answers).
    cancelled: tuple[str, ...] = ()


def run_state(
    description: Mapping[str, Any], history: Iterable[Mapping[str, Any]], stages: Sequence[str]
) -> RunState:
    """What ``description`` (DescribeExecution) and ``history`` (GetExecutionHistory's events, in
    any order: they are sorted by id) say of a run whose pipeline's top-level stages are ``stages``."""
    events = sorted(history, key=lambda e: int(e.get("id", 0)))
    top = set(stages)
    current: str | None = None
    state: Mapping[str, Any] | None = None
    looping: str | None = None
    tokens: list[str] = []
    cancelled: list[str] = []
    for event in events:
        kind = str(event.get("type", ""))
        if kind.endswith("StateEntered"):
            entered = event_detail(event, "stateEnteredEventDetails")
            name = str(entered.get("name", ""))
            stage = name.split(".", 1)[0]
            value = json_or_none(entered.get("input"))
            if stage in top and isinstance(value, dict) and "data" in value and "squadron" in value:
                current, state = stage, value
            if name.endswith(".again") and stage in top:
                looping = stage
            elif looping is not None and name == looping:
                looping = None
        elif kind == "TaskScheduled":
            parameters = json_or_none(event_detail(event, "taskScheduledEventDetails").get("parameters"))
            body = parameters.get("MessageBody") if isinstance(parameters, dict) else None
            token = body.get("task_token") if isinstance(body, dict) else None
            if isinstance(token, str) and token:
                tokens.append(token)
        elif kind == "TaskFailed":
            failed = event_detail(event, "taskFailedEventDetails")
            if failed.get("error") == RUN_CANCELLED:
                cancelled.append(str(failed.get("cause", "")))
    run_input_value = json_or_none(description.get("input"))
    return RunState(
        status=str(description.get("status", "")),
        error=description.get("error"),
        cause=description.get("cause"),
        input=run_input_value if isinstance(run_input_value, dict) else {},
        current=current,
        state=state,
        looping_gate=looping,
        tokens=tuple(tokens[-MAX_TOKENS:]),
        cancelled=tuple(cancelled[-MAX_TOKENS:]),
    )


# --- what to do with a run -----------------------------------------------------------------------


@dataclass(frozen=True)
class StopRun:
    """Answer ``tokens`` with :data:`RUN_CANCELLED`, then stop the execution (see the module)."""

    execution_arn: str
    tokens: tuple[str, ...]
    cause: str


@dataclass(frozen=True)
class StartRestart:
    """Start ``name`` on ``version_arn`` with ``input`` (it begins at ``input.restart.from``)."""

    version_arn: str
    name: str
    input: dict[str, Any]
    pipeline: str
    start_from: str


@dataclass(frozen=True)
class CommentOnRun:
    number: int
    body: str


@dataclass(frozen=True)
class Leave:
    """Nothing to do with this run; ``why`` is logged."""

    why: str


Step = StopRun | StartRestart | CommentOnRun | Leave


def stop_cause(key: str, event: str, run: RunRecord) -> str:
    """The cause a reaction stops a run with: it names the reaction's key, so a retry knows the
    stop as its own."""
    return f"{event} reached run {run.execution_arn} ({key})"


def restarted_trigger(started: Mapping[str, Any], restarting: Mapping[str, Any]) -> dict[str, Any]:
    """A restarted run's ``trigger``: its run's (``started``), with the facts of the event that
    restarted it (``restarting``: :func:`~squadron.domain.routing.pipelines.trigger_data` of the
    verified webhook) laid over — its event, delivery and sender, and for a pull request its head
    SHA and branches, so a template sees the head the run now follows — except :data:`RUN_OWN`."""
    return {**started, **{name: value for name, value in restarting.items() if name not in RUN_OWN}}


def restart_name(delivery: str, run: RunRecord) -> str:
    """The restarted run's name: one per triggering delivery and run (a retry is the same run)."""
    return execution_name(delivery, run.execution_arn, "restart")


def to_steer(runs: Sequence[RunRecord], event: str, delivery: str) -> list[RunRecord]:
    """The runs ``event`` (delivered as ``delivery``) reaches: those whose version handles it, but
    none this delivery started — neither its own restart (a retry finds both the run it restarted
    and the restart, and must not restart the restart) nor a run it triggered (a pipeline that
    both starts on an event and handles it is not steered by its own start)."""
    restarts_now = {restart_name(delivery, run) for run in runs} | {
        execution_name(delivery, run.pipeline, str(run.number) if run.number is not None else "repo")
        for run in runs
    }
    return [
        run
        for run in runs
        if run.handler(event) is not None and run.execution_arn.rsplit(":", 1)[-1] not in restarts_now
    ]


#: The statuses of a run that is over for good (``PENDING_REDRIVE`` is not: a redrive runs it again).
OVER = frozenset({"SUCCEEDED", "FAILED", "ABORTED", "TIMED_OUT"})


def over(seen: RunState | None) -> bool:
    """Whether Step Functions says the run is over (None: it does not know the run — not seen
    over, so not forgotten: a record may be read before its execution can be described)."""
    return seen is not None and seen.status in OVER


def _steerable(seen: RunState, cause: str) -> bool:
    """Running, or stopped by this reaction (an earlier attempt): by StopExecution's cause, or by
    the answers it failed the run's tasks with."""
    return seen.status == "RUNNING" or cause in (seen.cause, *seen.cancelled)


def reaction(
    run: RunRecord,
    seen: RunState | None,
    *,
    event: str,
    delivery: str,
    key: str,
    trigger: Mapping[str, Any] | None = None,
) -> list[Step]:
    """What ``event`` (delivered as ``delivery``; the reaction's outbox ``key``; its facts
    ``trigger``, which a restart lays over the run's: :func:`restarted_trigger`) does to ``run``,
    given what Step Functions says of it (``seen``; None: no such execution). An effect committed
    before it carried the facts (``trigger`` None) restarts a run with its own ``trigger``."""
    stages = run.stages
    handler = run.handler(event)
    if handler is None:
        return [Leave(f"run {run.execution_arn} has no handler of {event}")]
    if seen is None:
        return [Leave(f"run {run.execution_arn} does not exist")]
    cause = stop_cause(key, event, run)
    if not _steerable(seen, cause):
        return [Leave(f"run {run.execution_arn} is {seen.status}")]
    running = seen.status == "RUNNING"
    match handler:
        case CancelRun():
            return [StopRun(run.execution_arn, seen.tokens, cause)] if running else []
        case NotifyHandler(notify=notify):
            if run.number is None or not running:
                return [Leave(f"run {run.execution_arn} has no issue or pull request to notify")]
            try:
                said = _notice(run, event, notify.target, notify.message, seen, context=handler.context)
            except PipelineTemplateError as exc:
                return [Leave(f"run {run.execution_arn}: its notify message cannot be rendered: {exc}")]
            return [CommentOnRun(run.number, said)]
        case InvalidateAndRestart(invalidate=invalidate, restart_from=restart_from):
            start = seen.current if restart_from == "current" else restart_from
            return _restart(
                run,
                seen,
                cause=cause,
                delivery=delivery,
                trigger=trigger or {},
                start=start,
                invalidate=tuple(invalidate),
                stages=stages,
                context=handler.context,
            )
        case ReevaluateGates():
            if seen.looping_gate is None:
                return [
                    Leave(
                        f"run {run.execution_arn} is in no failed gate's loop: its gates are judged when reached"
                    )
                ]
            return _restart(
                run,
                seen,
                cause=cause,
                delivery=delivery,
                trigger=trigger or {},
                start=seen.looping_gate,
                invalidate=(),
                stages=stages,
                context=handler.context,
            )
        case WakeAgent():
            return [Leave("wake_agent is decided with the event (the issue's agents)")]
    return [Leave(f"unknown handler {handler!r}")]  # pragma: no cover - the union is exhaustive


def _restart(
    run: RunRecord,
    seen: RunState,
    *,
    cause: str,
    delivery: str,
    trigger: Mapping[str, Any],
    start: str | None,
    invalidate: tuple[str, ...],
    stages: Sequence[str],
    context: Mapping[str, Any],
) -> list[Step]:
    if start is None or start not in stages:
        return [Leave(f"run {run.execution_arn}: no stage {start!r} to restart from")]
    if seen.state is None:
        return [Leave(f"run {run.execution_arn} has not entered a stage yet: nothing to restart")]
    data = seen.state.get("data") if isinstance(seen.state.get("data"), Mapping) else {}
    assert isinstance(data, Mapping)
    finished = data.get("stages") if isinstance(data.get("stages"), Mapping) else {}
    assert isinstance(finished, Mapping)
    try:
        merged = with_context(data, context)
    except PipelineTemplateError as exc:
        return [Leave(f"run {run.execution_arn}: its handler's context cannot be rendered: {exc}")]
    dropped = {state_key(stage) for stage in (*invalidate, start)}
    kept = {name: value for name, value in finished.items() if name not in dropped}
    squadron = seen.input.get("squadron") if isinstance(seen.input.get("squadron"), Mapping) else {}
    assert isinstance(squadron, Mapping)
    started = seen.input.get("data") if isinstance(seen.input.get("data"), Mapping) else {}
    assert isinstance(started, Mapping)
    issue = squadron.get("issue_number")
    # Where the run's tasks are carried out (the router's own words when it started the run): the
    # restart is carried out in the same repository, or not at all (its tasks are refused).
    where = run_repository(run.repo_id, dict(seen.input))
    restarted = run_input(
        run.repo_id,
        issue if isinstance(issue, int) else None,
        restarted_trigger(started, trigger),
        repository=where[0] if where is not None else None,
        installation_id=where[1] if where is not None else None,
    )
    restarted["restart"] = {
        "from": start,
        "stages": kept,
        "counts": dict(seen.state.get("counts") or {}),
        "timeouts": dict(seen.state.get("timeouts") or {}),
        "context": merged,
    }
    steps: list[Step] = []
    if seen.status == "RUNNING":
        steps.append(StopRun(run.execution_arn, seen.tokens, cause))
    steps.append(StartRestart(run.version_arn, restart_name(delivery, run), restarted, run.pipeline, start))
    return steps


def with_context(data: Mapping[str, Any], context: Mapping[str, Any]) -> dict[str, Any]:
    """The run's context (``data.context``) with a handler's ``context`` on top, its templates
    rendered against the run's data (the reference's "additional context to inject"). Raises
    :class:`~.templates.PipelineTemplateError` when one cannot be rendered."""
    own = data.get("context")
    merged = dict(own) if isinstance(own, Mapping) else {}
    if context:
        merged.update(render(dict(context), namespaces(data)))
    return merged


def _notice(
    run: RunRecord,
    event: str,
    target: str | None,
    message: str,
    seen: RunState,
    *,
    context: Mapping[str, Any],
) -> str:
    """The handler's message, rendered against the run's data as it is now (its stages so far),
    with the handler's ``context`` added to the run's."""
    data = seen.state.get("data") if seen.state is not None else None
    if not isinstance(data, Mapping):
        data = {"trigger": seen.input.get("data", {})}
    data = {**data, "context": with_context(data, context)}
    said = (
        str(render(message, namespaces(data)))
        if message
        else f"`{event}` arrived while pipeline `{run.pipeline}` runs."
    )
    whom = f" (for the human group `{target}`)" if target else ""
    return f"{said}{whom}"
