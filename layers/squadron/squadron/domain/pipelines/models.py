"""The ``pipelines:`` of ``.squadron/config.yaml``: typed, validated, pure (the reference's format).

The format is the reference's (nbaertsch/squadron, docs/reference/pipeline-configuration.md):
the same keys, stage types, transitions, gate checks and reactive actions, so a team's pipeline
files carry over. Where this model is stricter or adds something, docs/pipelines.md names it
("Extensions and deviations"). Every model forbids unknown keys; a stage is one of eight types
(a union on ``type``), a gate condition one of eight checks (on ``check``), an action stage one
of five actions (on ``action``), a reactive handler one of five actions (on ``action``).

What one model cannot see — a transition to a missing stage, an unknown role, a sub-pipeline
cycle, the expanded size — :mod:`squadron.domain.pipelines.checks` checks across the models.
The models are the input of :mod:`squadron.domain.pipelines.compile` (to Step Functions).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Discriminator,
    Field,
    Tag,
    model_validator,
)

from squadron.domain.pipelines.conditions import (
    Condition,
    GateChecks,
    HumanCount,
)
from squadron.domain.pipelines.conditions import (
    StrictModel as _Model,
)
from squadron.domain.pipelines.conditions import (
    count_items as _count_items,
)
from squadron.domain.pipelines.limits import (
    DEFAULT_RUN_TIME,
    MAX_EXPECTED_OUTPUTS,
    MAX_EXTENSIONS,
    MAX_ITERATIONS,
    MAX_LIFECYCLE_ACTIONS,
    MAX_ON_EVENTS,
    MAX_PARALLEL_BRANCHES,
    MAX_PIPELINES,
    MAX_REMINDERS,
    MAX_RETRIES,
    MAX_RUN_TIME,
    MAX_STAGE_TIMEOUT,
    MAX_STAGES,
    MIN_DURATION,
    MIN_POLL_INTERVAL,
    MIN_REMINDER_INTERVAL,
)
from squadron.domain.pipelines.types import (
    EventName,
    ExpressionTemplate,
    OutputName,
    PipelineName,
    StageDuration,
    StageId,
    StageRef,
    Template,
    WebhookUrl,
    at_most,
    duration_schema,
    unique_names,
    within,
)
from squadron.domain.repo_config.types import Name, parse_duration

#: An agent's or a webhook's ``expected_outputs``: names an agent can report, each once.
ExpectedOutputs = Annotated[
    list[OutputName],
    _count_items(MAX_EXPECTED_OUTPUTS, "MAX_EXPECTED_OUTPUTS", "expected outputs"),
    AfterValidator(unique_names),
]

RetryCount = Annotated[
    int,
    Field(ge=0, json_schema_extra={"maximum": MAX_RETRIES}),
    at_most(MAX_RETRIES, "MAX_RETRIES", "retries"),
]
IterationCount = Annotated[
    int,
    Field(ge=1, json_schema_extra={"maximum": MAX_ITERATIONS}),
    at_most(MAX_ITERATIONS, "MAX_ITERATIONS", "iterations"),
]
ExtensionCount = Annotated[
    int,
    Field(ge=0, json_schema_extra={"maximum": MAX_EXTENSIONS}),
    at_most(MAX_EXTENSIONS, "MAX_EXTENSIONS", "extensions"),
]
ReminderCount = Annotated[
    int,
    Field(ge=1, json_schema_extra={"maximum": MAX_REMINDERS}),
    at_most(MAX_REMINDERS, "MAX_REMINDERS", "reminders"),
]
ReminderInterval = Annotated[
    int,
    BeforeValidator(parse_duration),
    within(MIN_REMINDER_INTERVAL, "MIN_REMINDER_INTERVAL", MAX_STAGE_TIMEOUT, "MAX_STAGE_TIMEOUT"),
    duration_schema(MIN_REMINDER_INTERVAL, MAX_STAGE_TIMEOUT),
]
PollInterval = Annotated[
    int,
    BeforeValidator(parse_duration),
    within(MIN_POLL_INTERVAL, "MIN_POLL_INTERVAL", MAX_STAGE_TIMEOUT, "MAX_STAGE_TIMEOUT"),
    duration_schema(MIN_POLL_INTERVAL, MAX_STAGE_TIMEOUT),
]
RunTime = Annotated[
    int,
    BeforeValidator(parse_duration),
    within(MIN_DURATION, "MIN_DURATION", MAX_RUN_TIME, "MAX_RUN_TIME"),
    duration_schema(MIN_DURATION, MAX_RUN_TIME),
]

#: The transitions' ends that are no stage.
Then = Literal["escalate", "fail", "cancel"]


# --- notifications --------------------------------------------------------------------------------


class Notify(_Model):
    """A notification: a comment on the run's issue or pull request mentioning ``target``."""

    target: Name | None = Field(default=None, description="A human group (human_groups) to mention.")
    message: Template = Field(default="", description="What to say (templates allowed).")


# --- transitions --------------------------------------------------------------------------------


class Goto(_Model):
    goto: StageRef = Field(description="The stage to go to.")


Transition = StageRef | Goto


class OnFail(_Model):
    """A failed gate goes back to ``goto`` at most ``max_iterations`` times, then ``then``."""

    goto: StageRef = Field(description="The stage to go back to.")
    max_iterations: IterationCount = Field(default=3, description="Most times it goes back.")
    then: Then = Field(default="escalate", description="After the last iteration: escalate, fail or cancel.")


class OnError(_Model):
    retry: RetryCount = Field(default=0, description="Retries of the stage before `then`.")
    then: StageRef | Literal["escalate", "fail"] | None = Field(
        default=None, description="After the retries: a stage id, escalate or fail (none: the run fails)."
    )


class OnTimeout(_Model):
    notify: Notify | None = Field(default=None, description="Who is told when the stage times out.")
    then: Then = Field(default="fail", description="fail, escalate or cancel, once no extension is left.")
    extend: StageDuration | None = Field(default=None, description="Each extension's length.")
    max_extensions: ExtensionCount = Field(default=0, description="Most extensions (each needs `extend`).")

    @model_validator(mode="after")
    def _extend_needs_length(self) -> OnTimeout:
        if self.max_extensions and self.extend is None:
            raise ValueError("max_extensions needs extend (the length of each extension)")
        return self


# --- stages -------------------------------------------------------------------------------------


class _Stage(_Model):
    id: StageId = Field(description="Unique in the pipeline (stages and parallel branches together).")
    condition: Condition | None = Field(default=None, description="Run only when true; else go to skip_to.")
    skip_to: StageRef | None = Field(default=None, description="Where to go when the condition is false.")
    timeout: StageDuration | None = Field(
        default=None, description="Longest the stage may take (at most 7d)."
    )
    on_timeout: OnTimeout | None = None
    on_complete: Transition | None = Field(default=None, description="Next stage (none: the one below).")
    on_error: OnError | None = None
    context: dict[str, Any] = Field(default_factory=dict, description="Values added to the run's context.")


class AgentStage(_Stage):
    """Start (or wake) an agent of a role on the run's issue or pull request, and wait for it."""

    type: Literal["agent"]
    agent: Name = Field(description="The role (a key of `roles`).")
    action: Template | None = Field(default=None, description="What the agent is asked to do.")
    continue_session: bool = Field(
        default=False, description="Resume the role's session rather than start one."
    )
    expected_outputs: ExpectedOutputs | None = Field(
        default=None, description="Output keys the agent must report."
    )
    pr: int | Template | None = Field(
        default=None, description="The pull request a review role works on, when not the run's (a template)."
    )


class GateStage(_Stage):
    """Wait until conditions hold (re-checked on the events they depend on)."""

    type: Literal["gate"]
    conditions: GateChecks | None = Field(default=None, description="All must pass (AND).")
    any_of: GateChecks | None = Field(default=None, description="One must pass (OR).")
    on_pass: Transition | None = Field(default=None, description="Next stage when the gate passes.")
    on_fail: StageRef | OnFail | None = Field(default=None, description="Where a failed gate goes.")

    def fail_transition(self) -> OnFail | None:
        """``on_fail`` in its one bounded form: a bare stage goes back at most 3 times, then escalates."""
        return OnFail(goto=self.on_fail) if isinstance(self.on_fail, str) else self.on_fail

    @model_validator(mode="after")
    def _one_kind_of_conditions(self) -> GateStage:
        if (self.conditions is None) == (self.any_of is None):
            raise ValueError(
                "a gate has conditions (all must pass) or any_of (one must pass), one of the two"
            )
        return self


class Reminder(_Model):
    interval: ReminderInterval = Field(description="Between two reminders (at least 1h).")
    message: Template = Field(default="", description="The reminder (templates allowed).")
    max_reminders: ReminderCount = Field(default=3, description="Most reminders.")


class HumanNotify(_Model):
    on_enter: Template | None = Field(default=None, description="Said when the stage starts.")
    reminder: Reminder | None = None


class HumanConfig(_Model):
    description: str = Field(default="", description="What the humans are asked.")
    wait_for: Literal["approval", "comment", "label", "dismiss"] = Field(default="approval")
    from_: Name | None = Field(
        default=None, alias="from", description="The human group (a key of `human_groups`)."
    )
    count: HumanCount = Field(default=1, description="Completions needed.")
    auto_assign: bool = Field(default=True, description="Assign the group's members.")
    notify: HumanNotify | None = None


class HumanStage(_Stage):
    """Wait for humans: an approval, a comment, a label or a dismissal."""

    type: Literal["human"]
    human: HumanConfig


class _Branch(_Model):
    id: StageId = Field(description="Unique in the pipeline (its outputs are `branches.<id>`).")
    condition: Condition | None = None
    timeout: StageDuration | None = None


class AgentBranch(_Branch):
    type: Literal["agent"] = "agent"
    agent: Name = Field(description="The role (a key of `roles`).")
    action: Template | None = None


class PipelineBranch(_Branch):
    type: Literal["pipeline"]
    pipeline: PipelineName = Field(description="A pipeline without trigger.")
    context: dict[str, Any] = Field(default_factory=dict)


# --- built-in actions (stages and branches) -----------------------------------------------------


class MergePrConfig(_Model):
    method: Literal["merge", "squash", "rebase"] | None = Field(
        default=None, description="Merge method (none: the approval flow's)."
    )
    delete_branch: bool = False
    pr: int | Template | None = Field(
        default=None, description="The pull request merged, when not the run's (a number or a template)."
    )


class NoConfig(_Model):
    pass


class LabelActionConfig(_Model):
    label: Template = Field(min_length=1)


class CommentActionConfig(_Model):
    message: Template = Field(min_length=1)


class _MergePr(_Model):
    action: Literal["merge_pr"]
    config: MergePrConfig = Field(default_factory=MergePrConfig)


class _ClosePr(_Model):
    action: Literal["close_pr"]
    config: NoConfig = Field(default_factory=NoConfig)


class _AddLabel(_Model):
    action: Literal["add_label"]
    config: LabelActionConfig


class _RemoveLabel(_Model):
    action: Literal["remove_label"]
    config: LabelActionConfig


class _Comment(_Model):
    action: Literal["comment"]
    config: CommentActionConfig


class _ActionStage(_Stage):
    type: Literal["action"]
    on_success: Transition | None = Field(default=None, description="Next stage when the action succeeded.")


class MergePrStage(_ActionStage, _MergePr):
    """Ask the merge gate to merge the run's pull request (approval flows still apply)."""

    on_conflict: StageRef | None = Field(default=None, description="Where a merge conflict goes.")


class ClosePrStage(_ActionStage, _ClosePr):
    pass


class AddLabelStage(_ActionStage, _AddLabel):
    pass


class RemoveLabelStage(_ActionStage, _RemoveLabel):
    pass


class CommentStage(_ActionStage, _Comment):
    pass


ActionStage = Annotated[
    MergePrStage | ClosePrStage | AddLabelStage | RemoveLabelStage | CommentStage,
    Field(discriminator="action"),
]


class _ActionBranch(_Branch):
    type: Literal["action"]


class MergePrBranch(_ActionBranch, _MergePr):
    pass


class ClosePrBranch(_ActionBranch, _ClosePr):
    pass


class AddLabelBranch(_ActionBranch, _AddLabel):
    pass


class RemoveLabelBranch(_ActionBranch, _RemoveLabel):
    pass


class CommentBranch(_ActionBranch, _Comment):
    pass


ActionBranch = Annotated[
    MergePrBranch | ClosePrBranch | AddLabelBranch | RemoveLabelBranch | CommentBranch,
    Field(discriminator="action"),
]


def _branch_tag(value: Any) -> str | None:
    if isinstance(value, dict):
        tag = value.get("type", "agent")
        return tag if isinstance(tag, str) else None
    return getattr(value, "type", None)


Branch = Annotated[
    Annotated[AgentBranch, Tag("agent")]
    | Annotated[PipelineBranch, Tag("pipeline")]
    | Annotated[ActionBranch, Tag("action")],
    Discriminator(_branch_tag),
]


class ParallelStage(_Stage):
    """Run branches at once; go on when all (or any) of them completed."""

    type: Literal["parallel"]
    join: Literal["all", "any"] = Field(default="all")
    branches: Annotated[
        list[Branch],
        Field(min_length=1),
        _count_items(MAX_PARALLEL_BRANCHES, "MAX_PARALLEL_BRANCHES", "branches"),
    ]


class Poll(_Model):
    interval: PollInterval = Field(description="Between two checks (at least 10s).")
    check: str | None = Field(
        default=None, description="A gate check without fields of its own (ci_status...)."
    )
    condition: ExpressionTemplate | None = Field(default=None, description="Ends the delay early when true.")

    @model_validator(mode="after")
    def _one_test(self) -> Poll:
        if (self.check is None) == (self.condition is None):
            raise ValueError("a poll has a check or a condition, one of the two")
        return self


class DelayStage(_Stage):
    """Wait ``duration`` (ended early when the poll's check or condition holds)."""

    type: Literal["delay"]
    duration: StageDuration = Field(description="How long (at most 7d).")
    poll: Poll | None = None


class WebhookRequest(_Model):
    url: WebhookUrl = Field(
        description="An https:// address with a literal public host (templates after the host)."
    )
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "POST"
    headers: dict[str, Template] = Field(default_factory=dict)
    body: dict[str, Any] | list[Any] | str | None = Field(
        default=None, description="Sent as JSON (templates allowed)."
    )


class WebhookExpect(_Model):
    status: Annotated[int, Field(ge=100, le=599)] | list[Annotated[int, Field(ge=100, le=599)]] = Field(
        default=200, description="The status code(s) that mean success."
    )


class WebhookStage(_Stage):
    """Call an outside service over https and check its answer."""

    type: Literal["webhook"]
    request: WebhookRequest
    expect: WebhookExpect | None = None
    expected_outputs: ExpectedOutputs | None = Field(
        default=None, description="Keys of the answer's JSON object taken as outputs."
    )
    on_success: Transition | None = None


class PipelineStage(_Stage):
    """Run another pipeline (one without trigger) and wait for it."""

    type: Literal["pipeline"]
    pipeline: PipelineName = Field(description="A pipeline without trigger, in the same `pipelines:`.")


Stage = Annotated[
    AgentStage
    | GateStage
    | HumanStage
    | ParallelStage
    | DelayStage
    | ActionStage
    | WebhookStage
    | PipelineStage,
    Field(discriminator="type"),
]

#: The stage types, as the reference's.
STAGE_TYPES = ("agent", "gate", "human", "parallel", "delay", "action", "webhook", "pipeline")


# --- reactive handlers, lifecycle actions, the pipeline ------------------------------------------


class _Handler(_Model):
    context: dict[str, Any] = Field(default_factory=dict, description="Values added to the run's context.")


class ReevaluateGates(_Handler):
    action: Literal["reevaluate_gates"]


class InvalidateAndRestart(_Handler):
    action: Literal["invalidate_and_restart"]
    invalidate: list[StageRef] = Field(
        default_factory=list, description="Stages whose results no longer hold."
    )
    restart_from: StageRef | Literal["current"] = Field(
        description="The stage to run again from (or current)."
    )


class CancelRun(_Handler):
    action: Literal["cancel"]


class NotifyHandler(_Handler):
    action: Literal["notify"]
    notify: Notify


class WakeAgent(_Handler):
    action: Literal["wake_agent"]


ReactiveHandler = Annotated[
    ReevaluateGates | InvalidateAndRestart | CancelRun | NotifyHandler | WakeAgent,
    Field(discriminator="action"),
]


class CommentAction(_Model):
    type: Literal["comment"]
    body: Template = Field(min_length=1, description="The comment on the run's issue or pull request.")


class LabelAction(_Model):
    type: Literal["label"]
    add: Template | None = Field(default=None, description="A label to add.")
    remove: Template | None = Field(default=None, description="A label to remove.")

    @model_validator(mode="after")
    def _something(self) -> LabelAction:
        if self.add is None and self.remove is None:
            raise ValueError("a label action adds or removes a label")
        return self


LifecycleAction = Annotated[CommentAction | LabelAction, Field(discriminator="type")]
LifecycleActions = Annotated[
    list[LifecycleAction], _count_items(MAX_LIFECYCLE_ACTIONS, "MAX_LIFECYCLE_ACTIONS", "actions")
]


class TriggerConditions(_Model):
    label: str | None = Field(default=None, description="The label just added (for *.labeled events).")
    base_branch: str | None = Field(default=None, description="The pull request's base branch.")


class Trigger(_Model):
    event: EventName = Field(description="The event that starts a run, e.g. issues.labeled.")
    conditions: TriggerConditions = Field(default_factory=TriggerConditions)


class Pipeline(_Model):
    """One pipeline: when it runs, its stages, how it reacts, what it does at the end."""

    description: str = Field(default="", description="What it is for.")
    trigger: Trigger | None = Field(
        default=None, description="None: a sub-pipeline, run only by pipeline stages."
    )
    scope: Literal["single-pr", "multi-pr", "issue"] = Field(
        default="single-pr", description="What a run follows."
    )
    on_events: Annotated[
        dict[EventName, ReactiveHandler], _count_items(MAX_ON_EVENTS, "MAX_ON_EVENTS", "event handlers")
    ] = Field(default_factory=dict, description="How a running pipeline reacts to events.")
    context: dict[str, Any] = Field(
        default_factory=dict, description="Values every stage's templates read as context."
    )
    stages: Annotated[list[Stage], Field(min_length=1), _count_items(MAX_STAGES, "MAX_STAGES", "stages")]
    on_complete: LifecycleActions = Field(default_factory=list, description="Done when the run completes.")
    on_error: LifecycleActions = Field(default_factory=list, description="Done when the run fails.")
    timeout: RunTime = Field(
        default=DEFAULT_RUN_TIME,
        description="Longest run, sub-pipelines included (an extension; at most 30d).",
    )


Pipelines = Annotated[
    dict[PipelineName, Pipeline],
    _count_items(MAX_PIPELINES, "MAX_PIPELINES", "pipelines"),
]
