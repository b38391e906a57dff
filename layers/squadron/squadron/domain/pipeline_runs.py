"""What a pipeline run is doing, read from Step Functions' own record of it (pure).

A run's current stages come from its execution history (GetExecutionHistory's events, oldest
first): the states entered and not yet left. A task state that waits for the router names its
stage type, step and configuration in its ``TaskScheduled`` parameters (the message
:func:`squadron.domain.pipeline_wire.task_parameters` compiled); a sub-pipeline stage names the
child run it started in its ``TaskSubmitted`` output; a delay is a ``Wait`` state. What the
operator CLI (``squadron pipelines``) and the dashboard issue show is formatted here too.

The history's parameters hold the stage's task token (``$$.Task.Token``, resolved): whoever
holds it can answer the stage. Nothing here keeps it: only the stage type, the step and the
configuration are read out of the message.

See docs/operations.md, "Pipelines".
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from squadron.domain.pipeline_wire import machines_head

#: A Step Functions execution ARN: partition, region, account, state machine, run name.
_EXECUTION = re.compile(
    r"^arn:(?P<partition>aws[a-z-]*):states:(?P<region>[a-z0-9-]{1,32}):(?P<account>\d{12}):execution:"
    r"(?P<machine>[A-Za-z0-9_-]{1,80}):(?P<name>[A-Za-z0-9_-]{1,80})$"
)
#: A run as ``squadron pipelines list`` names it: ``<state machine>:<run name>``.
_SHORT = re.compile(r"^(?P<machine>[A-Za-z0-9_-]{1,80}):(?P<name>[A-Za-z0-9_-]{1,80})$")
#: States that contain others: their end ends every state still open inside them.
_CONTAINERS = ("Parallel", "Map")
_CONTAINER_ENDS = frozenset(
    f"{container}State{end}" for container in _CONTAINERS for end in ("Failed", "Succeeded", "Aborted")
)
#: Task events that end a task (the state may still be left later, or caught).
_TASK_ENDS = frozenset(
    {
        "TaskSucceeded",
        "TaskFailed",
        "TaskTimedOut",
        "TaskStartFailed",
        "TaskSubmitFailed",
    }
)
_EXECUTION_ENDS = frozenset(
    {"ExecutionSucceeded", "ExecutionFailed", "ExecutionAborted", "ExecutionTimedOut"}
)
#: What a step around a stage waits for (see :data:`squadron.domain.pipeline_wire.Step`).
_STEPS = {
    "condition": "its condition to be evaluated",
    "poll": "a poll of its delay",
    "notify": "a notification to be sent",
    "remind": "a reminder to be sent",
    "escalate": "an escalation",
    "on_complete": "the pipeline's on_complete actions",
    "on_error": "the pipeline's on_error actions",
}
#: The longest text of a configuration value shown (a role, a group, an action).
MAX_SHOWN = 60
#: Failed, timed out, aborted: what the alarm counts (infra: the pipelines' failed-run rule).
FAILED_STATUSES = ("FAILED", "TIMED_OUT", "ABORTED")


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Waiting(_Model):
    """A state a run is in now: entered and not left."""

    state: str
    #: The ASL state type: Task, Wait, Pass, Choice, ...
    state_type: str
    entered_at: datetime
    #: agent, human, gate, action or webhook (a router task), ``pipeline`` (a sub-pipeline), None
    #: for a state of Step Functions' own (a delay's Wait) or a task not yet scheduled.
    stage_type: str | None = None
    step: str | None = None
    config: dict[str, Any] = Field(default_factory=dict)
    #: A sub-pipeline's child run, once started.
    child: str | None = None

    @property
    def waits_for(self) -> str:
        """What the state waits for, in a few words."""
        if self.state_type == "Wait":
            return "a delay"
        if self.stage_type == "pipeline":
            return f"its sub-pipeline run {run_id(self.child)}" if self.child else "its sub-pipeline to start"
        if self.state_type != "Task":
            return f"Step Functions ({self.state_type})"
        if self.stage_type is None:
            return "its task to be scheduled"
        if self.step and self.step != "stage":
            return _STEPS.get(self.step, self.step)
        return _stage_work(self.stage_type, self.config)


def _shown(value: Any) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 1] + "…"


def _stage_work(stage_type: str, config: Mapping[str, Any]) -> str:
    if stage_type == "agent" and config.get("agent"):
        return f"agent {_shown(config['agent'])}"
    if stage_type == "human":
        held = config.get("human")
        human: Mapping[str, Any] = held if isinstance(held, dict) else {}
        count = human.get("count", 1)
        wanted = _shown(human.get("wait_for", "approval"))
        group = human.get("from")
        return f"{count} human {wanted}{'' if count == 1 else 's'}" + (
            f" from {_shown(group)}" if group else ""
        )
    if stage_type == "gate":
        checks = [*(config.get("conditions") or []), *(config.get("any_of") or [])]
        names = [_shown(c.get("check")) for c in checks if isinstance(c, dict) and c.get("check")]
        return "gate checks" + (f": {', '.join(names[:5])}" if names else "")
    if stage_type == "action" and config.get("action"):
        return f"action {_shown(config['action'])}"
    if stage_type == "webhook":
        return "a webhook call"
    return f"{stage_type} stage"


def event_detail(event: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """A history event's ``key`` details (``taskScheduledEventDetails``...), empty when absent."""
    value = event.get(key)
    return value if isinstance(value, Mapping) else {}


def json_or_none(text: Any) -> Any:
    """``text`` parsed as JSON (a history event's input, output, cause), None when it is not."""
    if not isinstance(text, str):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _scheduled(event: Mapping[str, Any]) -> dict[str, Any]:
    """What a ``TaskScheduled`` says of the stage: type, step, config (never its token)."""
    detail = event_detail(event, "taskScheduledEventDetails")
    resource = str(detail.get("resource", ""))
    parameters = json_or_none(detail.get("parameters"))
    if not isinstance(parameters, dict):
        return {}
    if resource.startswith("startExecution"):
        return {"stage_type": "pipeline"}
    body = parameters.get("MessageBody")
    if isinstance(body, str):
        body = json_or_none(body)
    if not isinstance(body, dict) or body.get("kind") != "squadron.pipeline_task":
        return {}
    config = json_or_none(body.get("config"))
    return {
        "stage_type": str(body.get("stage_type")) if body.get("stage_type") else None,
        "step": str(body.get("step")) if body.get("step") else None,
        "config": config if isinstance(config, dict) else {},
    }


def _child(event: Mapping[str, Any]) -> str | None:
    detail = event_detail(event, "taskSubmittedEventDetails")
    if not str(detail.get("resource", "")).startswith("startExecution"):
        return None
    output = json_or_none(detail.get("output"))
    arn = output.get("ExecutionArn") if isinstance(output, dict) else None
    return arn if isinstance(arn, str) and _EXECUTION.match(arn) else None


class _Entry:
    def __init__(self, event_id: int, name: str, state_type: str, at: datetime, parent: int | None) -> None:
        self.event_id = event_id
        self.name = name
        self.state_type = state_type
        self.at = at
        self.parent = parent
        self.task_over = False
        self.facts: dict[str, Any] = {}


def _at(event: Mapping[str, Any]) -> datetime:
    value = event.get("timestamp")
    if isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value))


def current_stages(history: Iterable[Mapping[str, Any]]) -> list[Waiting]:
    """The states a run is in now, in the order they were entered; none once it ended.

    ``history``: GetExecutionHistory's events, oldest first. Each event belongs to the state its
    ``previousEventId`` chain leads to (the branches of a Parallel chain apart). A state is left
    by its ``...StateExited`` (or ``...StateAborted``); a task whose task ended (succeeded,
    failed, timed out) waits no more, even before the state is left or its error caught; a
    Parallel or Map that ends ends every state still open inside it.
    """
    scope: dict[int, int] = {}  # event id -> the entry (its StateEntered event's id) it belongs to
    entries: dict[int, _Entry] = {}
    open_: dict[int, _Entry] = {}
    for event in history:
        kind = str(event.get("type", ""))
        event_id = int(event.get("id", 0))
        previous = scope.get(int(event.get("previousEventId") or 0))
        if kind in _EXECUTION_ENDS:
            return []
        if kind.endswith("StateEntered"):
            name = str(event_detail(event, "stateEnteredEventDetails").get("name", ""))
            # after a state was left, the next one is its sibling, not its child
            parent = previous
            while parent is not None and parent not in open_:
                parent = entries[parent].parent
            entry = _Entry(event_id, name, kind.removesuffix("StateEntered"), _at(event), parent)
            entries[event_id] = open_[event_id] = entry
            scope[event_id] = event_id
            continue
        if kind.endswith(("StateExited", "StateAborted")) or kind in _CONTAINER_ENDS:
            left = event_detail(event, "stateExitedEventDetails").get("name")
            closing = previous
            if left is not None:  # the latest open entry of that name (a loop left the others)
                named = [e for e in open_.values() if e.name == left]
                closing = named[-1].event_id if named else closing
            if closing is not None:
                _close(open_, closing)
                scope[event_id] = closing
            continue
        if previous is None:
            continue
        scope[event_id] = previous
        entry = entries[previous]
        if kind == "TaskScheduled":
            entry.facts.update(_scheduled(event))
        elif kind == "TaskSubmitted":
            child = _child(event)
            if child is not None:
                entry.facts["child"] = child
        elif kind in _TASK_ENDS:
            entry.task_over = True
    return [
        Waiting(state=e.name, state_type=e.state_type, entered_at=e.at, **e.facts)
        for e in open_.values()
        if e.state_type not in _CONTAINERS and not e.task_over
    ]


def _close(open_: dict[int, _Entry], entry_id: int) -> None:
    """Close ``entry_id`` and every open entry inside it."""
    open_.pop(entry_id, None)
    for inner in [e for e in open_.values() if e.parent == entry_id]:
        _close(open_, inner.event_id)


def child_runs(history: Iterable[Mapping[str, Any]]) -> list[str]:
    """Every child run the run started (sub-pipelines), in order."""
    found: list[str] = []
    for event in history:
        if event.get("type") == "TaskSubmitted":
            child = _child(event)
            if child is not None and child not in found:
                found.append(child)
    return found


# --- names and links -------------------------------------------------------------------------


def run_id(execution_arn: str | None) -> str:
    """A run's short name: ``<state machine>:<run name>`` (what ``squadron pipelines`` takes)."""
    match = _EXECUTION.match(execution_arn or "")
    return f"{match['machine']}:{match['name']}" if match else str(execution_arn)


def arn_of_run(run: str, *, partition: str, region: str, account: str) -> str | None:
    """The execution ARN ``run`` names (an ARN, or ``<state machine>:<run name>``); None if neither."""
    if _EXECUTION.match(run):
        return run
    short = _SHORT.match(run)
    if short is None:
        return None
    return f"arn:{partition}:states:{region}:{account}:execution:{short['machine']}:{short['name']}"


def console_url(execution_arn: str) -> str:
    """The run's page in the Step Functions console (its region's)."""
    match = _EXECUTION.match(execution_arn)
    region = match["region"] if match else "us-east-1"
    return (
        f"https://{region}.console.aws.amazon.com/states/home?region={region}"
        f"#/v2/executions/details/{execution_arn}"
    )


def repository_of(prefix: str, execution_arn: str) -> int | None:
    """The repository whose pipeline ran ``execution_arn``, when its state machine is one of the
    deployment of ``prefix`` (``<prefix>_<repository id>-<pipeline>``); else None."""
    match = _EXECUTION.match(execution_arn)
    if match is None:
        return None
    head, found, rest = match["machine"].partition(machines_head(prefix))
    repository, dash, pipeline = rest.partition("-")
    if (
        head
        or not found
        or not repository.isdigit()
        or repository.startswith("0")
        or not dash
        or not pipeline
    ):
        return None
    return int(repository)


def pipeline_of(prefix: str, state_machine: str) -> str:
    """The pipeline's name as its state machine carries it (cut and hashed when it was long)."""
    name = state_machine.rsplit(":", 1)[-1] if state_machine.startswith("arn:") else state_machine
    rest = name.removeprefix(machines_head(prefix))
    return rest.partition("-")[2] or rest


# --- what is shown ---------------------------------------------------------------------------


class RunSummary(_Model):
    """One run as ``squadron pipelines`` and the dashboard show it."""

    execution_arn: str
    repository_id: int
    pipeline: str
    status: str
    started_at: datetime
    stopped_at: datetime | None = None
    #: The published version it runs (None: the state machine's latest, unversioned).
    version: int | None = None
    issue_number: int | None = None
    parent: str | None = None
    waiting: list[Waiting] = Field(default_factory=list)
    children: list[str] = Field(default_factory=list)
    error: str | None = None
    cause: str | None = None

    @property
    def run(self) -> str:
        return run_id(self.execution_arn)

    @property
    def console(self) -> str:
        return console_url(self.execution_arn)

    def row(self) -> dict[str, Any]:
        """JSON-ready (``--json``)."""
        return {
            "run": self.run,
            "execution_arn": self.execution_arn,
            "repository_id": self.repository_id,
            "pipeline": self.pipeline,
            "version": self.version,
            "issue": self.issue_number,
            "status": self.status,
            "started_at": self.started_at.isoformat(),
            "stopped_at": self.stopped_at.isoformat() if self.stopped_at else None,
            "waiting": [
                {
                    "state": w.state,
                    "state_type": w.state_type,
                    "stage_type": w.stage_type,
                    "step": w.step,
                    "waits_for": w.waits_for,
                    "entered_at": w.entered_at.isoformat(),
                }
                for w in self.waiting
            ],
            "parent": self.parent,
            "children": self.children,
            "error": self.error,
            "cause": self.cause,
            "console": self.console,
        }


def _table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(columns)]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in [columns, *rows]
    ]
    return "\n".join(lines) + "\n"


def _stages(run: RunSummary) -> str:
    return "; ".join(f"{w.state} ({w.waits_for})" for w in run.waiting) or "-"


def runs_table(runs: Sequence[RunSummary], *, more: int = 0) -> str:
    """``squadron pipelines list``: newest first, as given."""
    if not runs:
        return "no pipeline runs\n"
    rows = [
        [
            r.run,
            str(r.repository_id),
            r.pipeline,
            "-" if r.version is None else str(r.version),
            "-" if r.issue_number is None else f"#{r.issue_number}",
            r.status,
            r.started_at.strftime("%Y-%m-%d %H:%M"),
            _stages(r) if r.status == "RUNNING" else "-",
        ]
        for r in runs
    ]
    text = _table(("RUN", "REPOSITORY", "PIPELINE", "VERSION", "ISSUE", "STATUS", "STARTED", "NOW"), rows)
    return text + (f"... and {more} more (narrow it with --repo or --status)\n" if more else "")


def run_detail(run: RunSummary) -> str:
    """``squadron pipelines show``."""
    lines = [
        f"run:         {run.run}",
        f"pipeline:    {run.pipeline} (repository {run.repository_id}"
        + (f", issue #{run.issue_number}" if run.issue_number is not None else "")
        + ")",
        f"version:     {'latest (unversioned)' if run.version is None else run.version}",
        f"status:      {run.status}",
        f"started:     {run.started_at.isoformat()}",
        f"stopped:     {run.stopped_at.isoformat() if run.stopped_at else '-'}",
    ]
    if run.error or run.cause:
        lines.append(f"error:       {run.error or '-'}: {run.cause or ''}".rstrip())
    if run.parent:
        lines.append(f"parent:      {run_id(run.parent)}")
    lines.append("now:" if run.waiting else "now:         -")
    lines += [
        f"  {w.state} [{w.stage_type or w.state_type}] since {w.entered_at.isoformat()}: waits for {w.waits_for}"
        for w in run.waiting
    ]
    lines.append("children:" if run.children else "children:    -")
    lines += [f"  {run_id(child)}" for child in run.children]
    lines.append(f"console:     {run.console}")
    return "\n".join(lines) + "\n"
