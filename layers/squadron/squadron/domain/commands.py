"""Framework commands: what the framework's own parts (the reconciler, the merge gate, an agent's
task through the agent gateway, a schedule, an operator) ask the router to do.

Each travels on events.fifo inside an :class:`~squadron.domain.events.EventEnvelope` whose event
is :data:`SQUADRON_EVENT`, a name no webhook can claim. The ``Agent*`` commands report what an
agent did on GitHub (as GitHub answered the agent gateway); the router handles each like the
webhook GitHub would have sent. Pure.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, ClassVar, Literal

from pydantic import Field, model_validator

from squadron.domain.breakers import Limit
from squadron.domain.event_fields import (
    EnvelopeModel,
    IssueFields,
    IssueNumber,
    PullRequestFields,
    ReviewFields,
    StatusFields,
)
from squadron.domain.usage import MAX_MODELS, ModelTokens

#: A task's reported outputs (:attr:`TaskEnded.outputs`): at most this many, each key a name.
MAX_OUTPUTS = 20
OutputKey = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z][A-Za-z0-9_-]*$")]
OutputValue = Annotated[str, Field(max_length=2_000)]
#: Most inbox items a task's end names as told (:attr:`TaskEnded.told`), and an item's key:
#: a task learns the keys of its inbox's first MAX_TOLD items (:func:`squadron.domain.agents.inbox_keys`).
MAX_TOLD = 200
InboxKey = Annotated[str, Field(min_length=1, max_length=400)]


class RegisterBlocker(EnvelopeModel):
    """Framework command: ``issue_number`` is blocked by ``blocker_number``.

    Sent by the PM's register_blocker tool and by a dev agent's report_blocked
    tool (``sleep`` true: the agent sleeps until every blocker is closed).
    """

    type: Literal["register_blocker"] = "register_blocker"
    issue_number: IssueNumber
    blocker_number: IssueNumber
    #: The agent that sent the command and the launch token of the task that sent it: a
    #: command from a task that was since replaced (relaunched, or a restarted generation)
    #: must not act on its successor.
    agent_id: str | None = None
    launch_token: str | None = Field(default=None, min_length=1, max_length=64)
    sleep: bool = False
    note: str = ""

    @model_validator(mode="after")
    def _sender_is_whole(self) -> RegisterBlocker:
        if (self.agent_id is None) != (self.launch_token is None):
            raise ValueError("agent_id and launch_token come together (the sending task)")
        if self.sleep and self.agent_id is None:
            raise ValueError("sleep needs the sending task (agent_id and launch_token)")
        return self


class RecoverAgent(EnvelopeModel):
    """Framework command from the reconciler: an agent needs rescuing.

    ``relaunch``: its task is dead (no heartbeat, or ECS has no such task) — the
    router relaunches it with resume, once, then escalates. ``escalate``: it slept
    past its max_sleep_duration. ``launch``: its pending launch was held (RunTask
    refused it) and its back-off is over — the router tries the launch again. ``seen_version`` is the record version the
    reconciler judged: if the agent changed since (a heartbeat, a wake), the
    command is stale and changes nothing.
    """

    type: Literal["recover_agent"] = "recover_agent"
    agent_id: str = Field(min_length=1)
    #: The agent's issue (its message group); None for a repository's PM.
    issue_number: IssueNumber | None = None
    seen_version: int = Field(ge=1)
    action: Literal["relaunch", "escalate", "launch"]
    reason: str = Field(min_length=1, max_length=2_000)


class ReportConflict(EnvelopeModel):
    """Framework command from the merge gate: an agent's PR conflicts with its base (AD-005).

    The first report for a head commit wakes the dev agent to resolve it; a report for
    the same head after the agent's attempt ended files a needs-human issue and puts the
    agent to sleep on it.
    """

    type: Literal["report_conflict"] = "report_conflict"
    issue_number: IssueNumber
    pr_number: IssueNumber
    head_sha: str = Field(min_length=1, max_length=64)
    base: str = Field(min_length=1, max_length=255)


class TaskUsage(EnvelopeModel):
    """What one agent task used (added to the agent's life-long counters)."""

    tool_calls: int = Field(default=0, ge=0, le=1_000_000)
    turns: int = Field(default=0, ge=0, le=1_000_000)
    iterations: int = Field(default=0, ge=0, le=1_000_000)
    active_seconds: int = Field(default=0, ge=0, le=7 * 24 * 3600)
    #: The circuit breakers that warned the model (at their warning ratio), and the one that
    #: tripped, if any: each becomes a domain event when the router records the task's end.
    warned: tuple[Limit, ...] = Field(default=(), max_length=len(Limit))
    tripped: Limit | None = None
    #: The tokens each model read and wrote (what the task cost, priced by the router's table).
    tokens: tuple[ModelTokens, ...] = Field(default=(), max_length=MAX_MODELS)


class TaskEnded(EnvelopeModel):
    """Agent command: how an agent's task ended (sent by its host through the agent gateway).

    The router, the registry's single writer, does what the ending implies: it adds the
    task's usage to the agent's counters, lets an idle agent wait for its next event (or
    wakes it at once if news came meanwhile), hands an escalated agent to humans, and ends
    the launch's secret. ``agent_id`` and ``launch_token`` are stamped by the gateway from
    the verified caller, never taken from the task.
    """

    type: Literal["task_ended"] = "task_ended"
    agent_id: str = Field(min_length=1, max_length=200)
    launch_token: str = Field(min_length=1, max_length=64)
    #: The agent's issue (its message group); None for a repository's PM.
    issue_number: IssueNumber | None = None
    #: idle: the turn ended (report_complete or nothing left), the agent waits for its next event;
    #: sleeping: it reported a blocker (its register_blocker command came first); escalated: a
    #: breaker tripped or it asked for humans; failed: the host crashed (the reconciler relaunches).
    outcome: Literal["idle", "sleeping", "escalated", "failed"]
    reason: str = Field(default="", max_length=4_000)
    #: The model's last words (for an escalation: its summary for the humans).
    summary: str = Field(default="", max_length=8_000)
    #: What happened to the work in progress (committed and pushed, or why not).
    saved: str = Field(default="", max_length=2_000)
    usage: TaskUsage = Field(default_factory=TaskUsage)
    #: The session ran to its end (a relaunch after a death in a row is counted from here).
    finished: bool = True
    #: What report_complete said the work produced (a pipeline agent stage's outputs, its
    #: ``expected_outputs``: docs/pipelines.md): the agent's words, keyed by a name.
    outputs: dict[OutputKey, OutputValue] = Field(default_factory=dict, max_length=MAX_OUTPUTS)
    #: The inbox items (their :attr:`~squadron.domain.agents.InboxItem.key`) its model was told of
    #: (its wake prompt, a news prompt) and left unread: they wait for its next task and wake
    #: nothing now; an item not among them came as the task wound down, and wakes the agent.
    told: list[InboxKey] = Field(default_factory=list, max_length=MAX_TOLD)


class _AgentAction(EnvelopeModel):
    """What an agent just did on GitHub, as GitHub answered it (a framework command).

    The App's own webhooks are dropped at the ingress, so the router hears of what the
    App's agents do from the agent gateway, which carried the write out with the App's
    credentials and reports it from GitHub's answer — never from the task's words. The
    router handles each like the webhook GitHub would have sent, with the App as sender.
    """

    #: The event GitHub would have sent (the router's handlers are shared with it).
    webhook: ClassVar[tuple[str, str | None]]


class AgentOpenedIssue(_AgentAction):
    """A dev agent filed an issue (its blocker): the PM triages it like any other."""

    type: Literal["agent_opened_issue"] = "agent_opened_issue"
    webhook: ClassVar[tuple[str, str | None]] = ("issues", "opened")
    issue: IssueFields

    @property
    def issue_number(self) -> int:
        return self.issue.number


class AgentAssignedIssue(_AgentAction):
    """The PM assigned an issue to the App: its dev agent starts."""

    type: Literal["agent_assigned_issue"] = "agent_assigned_issue"
    webhook: ClassVar[tuple[str, str | None]] = ("issues", "assigned")
    issue: IssueFields

    @property
    def issue_number(self) -> int:
        return self.issue.number


class AgentOpenedPullRequest(_AgentAction):
    """A dev agent opened its pull request: it is linked and its reviewers start."""

    type: Literal["agent_opened_pull_request"] = "agent_opened_pull_request"
    webhook: ClassVar[tuple[str, str | None]] = ("pull_request", "opened")
    pull_request: PullRequestFields

    @property
    def issue_number(self) -> int:
        return self.pull_request.number


class AgentPushedCommits(_AgentAction):
    """A dev agent pushed to its open pull request's branch: its reviewers run again."""

    type: Literal["agent_pushed_commits"] = "agent_pushed_commits"
    webhook: ClassVar[tuple[str, str | None]] = ("pull_request", "synchronize")
    pull_request: PullRequestFields

    @property
    def issue_number(self) -> int:
        return self.pull_request.number


class AgentSubmittedReview(_AgentAction):
    """A review agent submitted its review: the dev agent hears of changes, the gate judges."""

    type: Literal["agent_submitted_review"] = "agent_submitted_review"
    webhook: ClassVar[tuple[str, str | None]] = ("pull_request_review", "submitted")
    review: ReviewFields
    pull_request: PullRequestFields

    @property
    def issue_number(self) -> int:
        return self.pull_request.number


class AgentPostedStatus(_AgentAction):
    """A review agent posted its squadron/<role> status: the merge gate judges the PR again."""

    type: Literal["agent_posted_status"] = "agent_posted_status"
    webhook: ClassVar[tuple[str, str | None]] = ("status", None)
    status: StatusFields
    #: The pull request it is on (its message group, as the status's webhook has none).
    pr_number: IssueNumber

    @property
    def issue_number(self) -> int:
        return self.pr_number


AgentAction = (
    AgentOpenedIssue
    | AgentAssignedIssue
    | AgentOpenedPullRequest
    | AgentPushedCommits
    | AgentSubmittedReview
    | AgentPostedStatus
)
AGENT_ACTIONS = (
    AgentOpenedIssue,
    AgentAssignedIssue,
    AgentOpenedPullRequest,
    AgentPushedCommits,
    AgentSubmittedReview,
    AgentPostedStatus,
)


class FinishDecision(EnvelopeModel):
    """Framework command from the reconciler: carry out what a committed decision left undone.

    A decision's outside effects are carried out right after its commit; when that failed and
    its delivery was not retried (it went to the dead-letter queue), the reconciler sends this.
    The router looks the decision up by ``decision`` and carries out its outbox, each effect
    under its key (what was done already is not done again). It never decides anything.
    """

    type: Literal["finish_decision"] = "finish_decision"
    decision: str = Field(min_length=1, max_length=200)
    #: In the repository's message group (a decision spans the issues of its delivery).
    issue_number: None = None


class StartRetrospective(EnvelopeModel):
    """Framework command: hold the repository's retrospective of a period.

    Sent by the repository's EventBridge Scheduler schedule (weekly by default, the
    repository's ``retrospective.schedule``: the schedule's input is this envelope, its
    delivery id and times filled in by the Scheduler with the firing's time), by an operator
    (``squadron retro start``), or made by the router of a milestone's ``closed`` webhook. The
    router decides; the figures are computed by code from the repository's history.
    """

    type: Literal["start_retrospective"] = "start_retrospective"
    trigger: Literal["schedule", "milestone", "operator"] = "schedule"
    #: The period's end (None: the envelope's ``occurred_at``, the schedule's firing time).
    window_end: datetime | None = None
    #: Its start (None: the previous retrospective's end, else ``window_days`` before the end).
    window_start: datetime | None = None
    window_days: int = Field(default=7, ge=1, le=366)
    milestone_number: int | None = Field(default=None, ge=1)
    milestone_title: str | None = Field(default=None, max_length=256)
    #: In the repository's message group.
    issue_number: None = None


SquadronCommand = Annotated[
    StartRetrospective
    | RegisterBlocker
    | RecoverAgent
    | ReportConflict
    | TaskEnded
    | FinishDecision
    | AgentOpenedIssue
    | AgentAssignedIssue
    | AgentOpenedPullRequest
    | AgentPushedCommits
    | AgentSubmittedReview
    | AgentPostedStatus,
    Field(discriminator="type"),
]

#: The event name of framework commands. Never in :data:`ROUTED_EVENTS`, so a
#: webhook can never claim to be one.
SQUADRON_EVENT = "squadron"
