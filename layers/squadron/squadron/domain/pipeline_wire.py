"""The wire between a pipeline's state machine and the router — pure.

A repository's pipelines run as Step Functions state machines (docs/architecture.md, "Pipelines
on Step Functions"). The state machine owns waiting; a stage that needs work (an agent, a human,
a gate) is a ``arn:aws:states:::sqs:sendMessage.waitForTaskToken`` task that puts a
:class:`PipelineTask` on events.fifo and waits for its token. The router carries the stage out
under its commit point and answers with :class:`StageSucceeded` (SendTaskSuccess) or
:class:`StageFailed` (SendTaskFailure).

This module is the contract the pipeline compiler emits and the router reads:

- :func:`task_parameters` is the ``Parameters`` of such a task state: the message body is built
  by Step Functions from literals the compiler knows (repository, pipeline, definition digest,
  stage type) and from the context object (``$$.Execution.Id``, ``$$.State.Name``,
  ``$$.State.EnteredTime``, ``$$.Task.Token``); it goes in the run's message group (the issue's,
  as for every event of that issue) with a deduplication id unique to this entry of the state.
- :func:`run_input` is what a run starts with (its ``squadron`` part is what the task states
  read through ``$$.Execution.Input``).
- :func:`parse_task` tells a pipeline task from an event envelope and validates it, bounds
  included; :func:`origin_problem` checks that the execution that sent it is one of the
  repository's own state machines.
- :func:`state_machine_name` and :func:`execution_name` are the deterministic, bounded names
  Step Functions accepts (at most 80 characters of ``[A-Za-z0-9_-]``).
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from squadron.domain.event_fields import GitHubId, IssueNumber

#: The ``kind`` of a pipeline task message; an event envelope has no ``kind``.
TASK_KIND: Literal["squadron.pipeline_task"] = "squadron.pipeline_task"
TASK_SCHEMA_VERSION: Literal[1] = 1
#: The SQS task integration that waits for the router's answer.
SEND_AND_WAIT = "arn:aws:states:::sqs:sendMessage.waitForTaskToken"
#: The Step Functions integration a sub-pipeline stage starts its child run with.
START_CHILD = "arn:aws:states:::states:startExecution.sync:2"
#: The input key Step Functions reads to tie a child execution to the execution that started it.
STARTED_BY = "AWS_STEP_FUNCTIONS_STARTED_BY_EXECUTION_ID"

#: Step Functions' own limits on names (state machines, executions): 1..80 of these characters.
MAX_NAME = 80
_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")
#: SendTaskSuccess/Failure/Heartbeat accept a token of 1..2048 characters.
MAX_TOKEN = 2048
#: SendTaskFailure: error at most 256 characters, cause at most 32,768.
MAX_ERROR = 256
MAX_CAUSE = 32_768
#: What a stage gets as input and gives back as output (serialized JSON, bytes). Step Functions
#: carries up to 256 KiB per state; a stage's part is kept far below so that a run's state never
#: approaches it, and events.fifo's message stays small.
MAX_STAGE_INPUT_BYTES = 32 * 1024
MAX_STAGE_OUTPUT_BYTES = 32 * 1024
#: Longest pipeline name and stage (state) name carried; ASL state names are at most 80 characters.
MAX_PIPELINE = 128
MAX_STAGE = 80

#: The stage types that wait for the router (delay, parallel and sub-pipeline stages are Step
#: Functions' own: Wait, Parallel, a child execution).
StageType = Literal["agent", "human", "gate", "action", "webhook"]

#: Errors the router fails a stage with; a compiled state catches them by name.
STAGE_REJECTED = "Squadron.StageRejected"
TASK_INVALID = "Squadron.TaskInvalid"
#: The stage's work failed (an agent ended failed, a webhook's answer was not the expected one):
#: what ``on_error`` retries and routes.
STAGE_FAILED = "Squadron.StageFailed"
#: A ``merge_pr`` stage met a conflict: what ``on_conflict`` routes.
MERGE_CONFLICT = "Squadron.MergeConflict"
#: How a compiled run ends when it does not complete (its ``Fail`` states' errors).
RUN_FAILED = "Squadron.Failed"
RUN_ESCALATED = "Squadron.Escalated"
RUN_CANCELLED = "Squadron.Cancelled"

#: What a waiting task asks of the router: the stage's own work, or one of the steps the compiler
#: adds around it (a stage's ``condition``, a delay's poll, a notification, a reminder, an
#: escalation, the pipeline's ``on_complete`` / ``on_error`` actions).
#: ``stop``: an agent stage's timeout fired for good (no extension left): its agent is stopped.
Step = Literal[
    "stage", "condition", "poll", "notify", "remind", "escalate", "on_complete", "on_error", "stop"
]
#: The longest step configuration a task carries, in characters (the stage's definition, as compiled).
MAX_CONFIG_CHARS = 32 * 1024
#: The error a Parallel branch ends with when it is the first to finish a "join any" (its
#: Parallel catches it: ASL has no native "any").
JOIN_ANY = "Squadron.JoinAny"
#: The error an agent branch ends with when its timeout ran out (after its ``.stop`` task stopped
#: its agent); its parallel stage catches it as a timeout (a ``Fail`` cannot raise ``States.*``).
BRANCH_TIMED_OUT = "Squadron.BranchTimedOut"

_ARN = re.compile(
    r"^arn:aws[a-z-]*:states:[a-z0-9-]{1,32}:\d{12}:execution:(?P<machine>[A-Za-z0-9_-]{1,80}):"
    r"(?P<name>[A-Za-z0-9_-]{1,80})$"
)
#: A repository's full name as GitHub spells it: an owner (letters, digits, hyphens) and a name
#: (also ``_`` and ``.``, never ``.`` or ``..`` alone).
_FULL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,38}/(?!\.\.?$)[A-Za-z0-9_.-]{1,100}")
_ERROR = r"^Squadron\.[A-Za-z][A-Za-z0-9]{0,63}$"
_DIGEST = r"^[0-9a-f]{8,64}$"


class WireError(ValueError):
    """A pipeline task or answer that breaks the wire's rules; ``problem`` says which."""

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(problem)


def _bounded(limit: int, what: str) -> Any:
    def check(value: dict[str, Any]) -> dict[str, Any]:
        size = len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
        if size > limit:
            raise ValueError(f"{what} is {size} bytes, over {limit}")
        return value

    return AfterValidator(check)


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PipelineTask(_Model):
    """What a waiting stage puts on events.fifo: the router carries it out and answers the token."""

    kind: Literal["squadron.pipeline_task"] = TASK_KIND
    schema_version: Literal[1] = TASK_SCHEMA_VERSION
    repository_id: GitHubId
    #: The run's issue or pull request (None: a repository-wide run, in the repository's group).
    issue_number: IssueNumber | None = None
    pipeline: str = Field(min_length=1, max_length=MAX_PIPELINE, pattern=r"^[!-~]+$")
    #: The digest the compiler stamped in this definition (of the pipeline's compiled config).
    definition: str = Field(pattern=_DIGEST)
    execution_arn: str = Field(max_length=2048, pattern=_ARN.pattern)
    stage: str = Field(min_length=1, max_length=MAX_STAGE)
    stage_type: StageType
    #: When the state was entered (``$$.State.EnteredTime``): with the execution and the stage it
    #: names this entry of the stage (a loop back enters it again, with a new time).
    entered_at: datetime
    retry_count: int = Field(default=0, ge=0, le=99)
    task_token: str = Field(min_length=1, max_length=MAX_TOKEN, repr=False)
    input: Annotated[dict[str, Any], _bounded(MAX_STAGE_INPUT_BYTES, "the stage's input")] = Field(
        default_factory=dict
    )
    #: What is asked (the stage's work or a step around it) and its configuration as compiled into
    #: the run's version (JSON text: a literal of the definition, so a later version never changes
    #: what a running execution asks).
    step: Step = "stage"
    config: str = Field(default="{}", max_length=MAX_CONFIG_CHARS)

    @property
    def step_config(self) -> dict[str, Any]:
        """``config`` read (validated as a JSON object when the task was)."""
        value: dict[str, Any] = json.loads(self.config)
        return value

    @model_validator(mode="after")
    def _config_is_an_object(self) -> PipelineTask:
        try:
            value = json.loads(self.config)
        except ValueError as exc:
            raise ValueError(f"config is not JSON: {exc}") from exc
        if not isinstance(value, dict):
            raise ValueError("config is not a JSON object")
        return self

    @property
    def machine(self) -> str:
        """The state machine's name, from the execution's ARN."""
        match = _ARN.match(self.execution_arn)
        assert match is not None  # the field's pattern
        return match["machine"]

    @property
    def entry(self) -> str:
        """A stable key of this entry of the stage (what the router's records are keyed by): a
        ``Retry`` of the state keeps its entry time, so its retry count tells the attempts apart."""
        text = f"{self.execution_arn}/{self.stage}/{self.entered_at.isoformat()}/{self.retry_count}"
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    @property
    def message_group_id(self) -> str:
        return message_group_id(self.repository_id, self.issue_number)


class StageSucceeded(_Model):
    """The router's answer that a stage is done: SendTaskSuccess with ``output``."""

    output: Annotated[dict[str, Any], _bounded(MAX_STAGE_OUTPUT_BYTES, "the stage's output")] = Field(
        default_factory=dict
    )

    def wire(self) -> str:
        return json.dumps(self.output, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


class StageFailed(_Model):
    """The router's answer that a stage failed: SendTaskFailure, caught by the state's ``Catch``."""

    error: str = Field(pattern=_ERROR, max_length=MAX_ERROR)
    cause: str = Field(default="", max_length=MAX_CAUSE)

    @classmethod
    def of(cls, error: str, cause: str) -> StageFailed:
        """A failure whose cause is cut to the bound (a clear error, never a refused answer)."""
        return cls(error=error, cause=cause if len(cause) <= MAX_CAUSE else cause[: MAX_CAUSE - 1] + "…")


StageAnswer = StageSucceeded | StageFailed


# --- names ------------------------------------------------------------------------------------


def _hash(text: str, length: int) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:length]


def _named(text: str, limit: int) -> str:
    """``text`` in Step Functions' name characters, at most ``limit`` long; a text that had to be
    changed gets a hash of the original, so two names never meet."""
    clean = _NAME_CHARS.sub("-", text)
    if clean == text and len(text) <= limit:
        return text
    suffix = _hash(text, 10)
    return f"{clean[: limit - len(suffix) - 1]}-{suffix}"


#: What ends the deployment's prefix in its state machines' names. No prefix contains it (a
#: deployment's prefix is ``squadron-<stage>`` and a stage name is ``[a-z][a-z0-9-]*``), so the
#: names of ``<prefix>_*`` are this deployment's alone: ``squadron-prod_*`` never matches the
#: ``squadron-prod-x_*`` of a stage named ``prod-x`` in the same account (IAM, the failed-run rule).
PREFIX_END = "_"
#: A deployment's prefix: Step Functions' name characters without :data:`PREFIX_END`.
PREFIX_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9-]{0,31}$"


def machines_head(prefix: str) -> str:
    """What every state machine of the deployment's pipelines begins with: ``<prefix>_``."""
    if not re.fullmatch(PREFIX_PATTERN, prefix):
        raise WireError(
            f"state machine prefix {prefix!r}: 1..32 of [A-Za-z0-9-], starting alphanumeric "
            f"(no {PREFIX_END!r}: it ends the prefix)"
        )
    return prefix + PREFIX_END


def machine_head(prefix: str, repository_id: int) -> str:
    """What the state machines of one repository's pipelines begin with: ``<prefix>_<repository id>-``."""
    if repository_id <= 0:
        raise WireError(f"repository id {repository_id} is not positive")
    return f"{machines_head(prefix)}{repository_id}-"


def state_machine_name(prefix: str, repository_id: int, pipeline: str) -> str:
    """The state machine of a repository's pipeline: ``<prefix>_<repository id>-<pipeline>``.

    ``prefix`` names the deployment (IAM policies are scoped to ``<prefix>_*``): a name of
    Step Functions' characters without ``_`` (:data:`PREFIX_END`), short enough to leave room for
    the rest.
    """
    head = machine_head(prefix, repository_id)
    return head + _named(pipeline, MAX_NAME - len(head))


def execution_name(*parts: str) -> str:
    """A run's deterministic execution name from what started it (e.g. the delivery id, the
    pipeline and the issue): the same start, retried, names the same execution."""
    if not parts or any(not part for part in parts):
        raise WireError("an execution name needs non-empty parts")
    return "run-" + _hash("\x1f".join(parts), 64)


def message_group_id(repository_id: int, issue_number: int | None) -> str:
    """The FIFO message group of a run's tasks: the issue's, as the ingress names it for every event
    of that issue (:attr:`squadron.domain.events.EventEnvelope.message_group_id`)."""
    return f"{repository_id}#{issue_number if issue_number is not None else 'repo'}"


def definition_digest(definition: str | dict[str, Any]) -> str:
    """SHA-256 of a definition's canonical JSON: what tells whether a definition changed."""
    value = json.loads(definition) if isinstance(definition, str) else definition
    canonical = json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


# --- what the compiler emits ------------------------------------------------------------------


def run_input(
    repository_id: int,
    issue_number: int | None,
    data: dict[str, Any] | None = None,
    *,
    repository: str | None = None,
    installation_id: int | None = None,
) -> dict[str, Any]:
    """A run's execution input: ``squadron`` (read by every task state through
    ``$$.Execution.Input``; a sub-pipeline's child gets its parent's) and the pipeline's own
    ``data``. ``repository`` (its full name) and ``installation_id`` are where the router carries
    the run's tasks out (:func:`run_repository`): the router starts every run, so they are its own
    words, never a task message's."""
    where: dict[str, Any] = {}
    if repository is not None:
        where = {"repository": repository, "installation_id": installation_id}
    return {
        "squadron": {
            "repository_id": repository_id,
            "issue_number": issue_number,
            "message_group": message_group_id(repository_id, issue_number),
            **where,
        },
        "data": dict(data or {}),
    }


def run_repository(repository_id: int, execution_input: Any) -> tuple[str, int | None] | None:
    """The repository's full name and installation a run of ``repository_id`` was started for
    (:func:`run_input`), or None when its input names none or another repository."""
    held = execution_input.get("squadron") if isinstance(execution_input, dict) else None
    if not isinstance(held, dict) or held.get("repository_id") != repository_id:
        return None
    name, installation = held.get("repository"), held.get("installation_id")
    if not isinstance(name, str) or not _FULL_NAME.fullmatch(name):
        return None
    if installation is not None and (not isinstance(installation, int) or isinstance(installation, bool)):
        return None
    return name, installation


def task_parameters(
    *,
    queue_url: str,
    repository_id: int,
    pipeline: str,
    definition: str,
    stage_type: StageType,
    input_path: str = "$.data",
    step: Step = "stage",
    config: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``Parameters`` of a stage's task state (``Resource``: :data:`SEND_AND_WAIT`).

    The deduplication id hashes the execution, the state and the time it was entered, and the
    retry count: a Step Functions retry of the send is one message, a new entry of the stage (a
    loop, a ``Retry``) another. ``input_path`` picks the stage's input from the state's input.
    ``step`` and ``config`` say what is asked; the configuration travels as JSON text, a string
    Step Functions never reads as a path (a key of the repository's that ends in ``.$`` stays a
    key).
    """
    if not re.fullmatch(_DIGEST, definition):
        raise WireError(f"definition digest {definition!r} is not 8..64 lowercase hex")
    if not input_path.startswith("$"):
        raise WireError(f"input path {input_path!r} is not a JSONPath")
    text = json.dumps(config or {}, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    if len(text) > MAX_CONFIG_CHARS:
        raise WireError(f"the {step} configuration is {len(text)} characters, over {MAX_CONFIG_CHARS}")
    return {
        "QueueUrl": queue_url,
        "MessageGroupId.$": "$$.Execution.Input.squadron.message_group",
        "MessageDeduplicationId.$": (
            "States.Hash(States.Format('{}/{}/{}/{}', $$.Execution.Id, $$.State.Name, "
            "$$.State.EnteredTime, $$.State.RetryCount), 'SHA-256')"
        ),
        "MessageBody": {
            "kind": TASK_KIND,
            "schema_version": TASK_SCHEMA_VERSION,
            "repository_id": repository_id,
            "issue_number.$": "$$.Execution.Input.squadron.issue_number",
            "pipeline": pipeline,
            "definition": definition,
            "execution_arn.$": "$$.Execution.Id",
            "stage.$": "$$.State.Name",
            "stage_type": stage_type,
            "entered_at.$": "$$.State.EnteredTime",
            "retry_count.$": "$$.State.RetryCount",
            "task_token.$": "$$.Task.Token",
            "input.$": input_path,
            "step": step,
            "config": text,
        },
    }


#: A child run's name: the parent's execution, the state and this entry of it (its time).
CHILD_NAME = (
    "States.Format('sub-{}', States.Hash(States.Format('{}/{}/{}', $$.Execution.Id, "
    "$$.State.Name, $$.State.EnteredTime), 'SHA-256'))"
)


def execution_head(state_machine_arn: str) -> str:
    """The head of the ARNs of a state machine's runs (``...:execution:<name>``), from its ARN or one
    of its versions' (a run's ARN names the state machine, never the version)."""
    head, _, machine = state_machine_arn.partition(":stateMachine:")
    return f"{head}:execution:{machine.split(':', 1)[0]}"


def child_parameters(
    state_machine_arn: str, input_path: str = "$.data", name_path: str | None = None
) -> dict[str, Any]:
    """The ``Parameters`` of a sub-pipeline stage (``Resource``: :data:`START_CHILD`): the child
    runs in the parent's message group, tied to its parent (:data:`STARTED_BY`), named after the
    parent and this entry of the stage (:data:`CHILD_NAME`): Step Functions retrying the start
    names the same child (a start is idempotent), and a stage entered again starts a new one.
    ``name_path``: the name as an earlier state computed it (a sub-pipeline whose timeout may be
    extended: the extension starts the same child again, which is the one at work)."""
    return {
        "StateMachineArn": state_machine_arn,
        "Name.$": name_path if name_path is not None else CHILD_NAME,
        "Input": {
            STARTED_BY + ".$": "$$.Execution.Id",
            "squadron.$": "$$.Execution.Input.squadron",
            "data.$": input_path,
        },
    }


# --- what the router reads --------------------------------------------------------------------


def parse_task(body: str | bytes) -> PipelineTask | None:
    """The pipeline task in a queue record's ``body``; None when the body is not one (an event
    envelope: the caller parses it as such). A body that says it is one but breaks the rules
    raises :class:`WireError` naming the first problem."""
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict) or value.get("kind") != TASK_KIND:
        return None
    try:
        return PipelineTask.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "body"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise WireError(f"pipeline task {where}: {first['msg']}{more}") from exc


def origin_problem(task: PipelineTask, prefix: str) -> str | None:
    """None when ``task`` comes from one of its repository's state machines; else why not.

    The execution's state machine must be named ``<prefix>_<repository id>-...``: a message that
    claims one repository from another repository's run (or from outside the deployment) is refused.
    """
    head = machine_head(prefix, task.repository_id)
    if not task.machine.startswith(head):
        return f"execution {task.execution_arn} is not a run of repository {task.repository_id}'s pipelines"
    if task.machine != state_machine_name(prefix, task.repository_id, task.pipeline):
        return f"execution {task.execution_arn} is not a run of pipeline {task.pipeline!r}"
    return None
