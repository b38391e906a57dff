"""Effects: what the router decided, as plain data the shell carries out.

Registry effects carry the new record and the version they expect to replace,
so applying one twice, or after somebody else's write, fails its condition
instead of overwriting newer state.

A decision is carried out in three steps (:func:`split_decision`):

1. *facts* — news of the event itself (an issue's state, the App's assignment, a
   review): idempotent writes guarded by GitHub's time or id, applied first;
2. the *commit* — every registry write of the decision (agents, edges, links, inbox
   items) together with
   its :class:`Decision` record (the outbox: every effect outside the commit, in
   order) in one transaction (a decision too big for one is staged, whole all the same:
   :mod:`squadron.adapters.staged_decisions`). A lost condition re-reads and re-decides:
   nothing outside the registry has happened yet;
3. the *outbox* — GitHub calls, task launches and the merge gate, carried out from the committed record, each with a key
   (:func:`effect_key`) that makes a retry harmless. A retry of the same delivery
   finds the record and carries out the rest instead of deciding again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, Literal, assert_never

from pydantic import Field, TypeAdapter

from squadron.domain.agents import AgentRecord, InboxItem, IssueState


@dataclass(frozen=True)
class AgentWrite:
    """Store ``record``; ``expected_version`` None means it must not exist yet."""

    record: AgentRecord
    expected_version: int | None


@dataclass(frozen=True)
class PutAgent:
    write: AgentWrite
    kind: Literal["put_agent"] = "put_agent"


@dataclass(frozen=True)
class SetIssueState:
    """Record an issue's state as of ``occurred_at`` (GitHub time); an older state never overwrites a newer one."""

    repo_id: int
    number: int
    state: IssueState
    occurred_at: datetime
    kind: Literal["set_issue_state"] = "set_issue_state"


@dataclass(frozen=True)
class SetIssueAssignment:
    """Record whether the App is assigned to the issue as of ``occurred_at``; older news never wins."""

    repo_id: int
    number: int
    assigned: bool
    occurred_at: datetime
    kind: Literal["set_issue_assignment"] = "set_issue_assignment"


@dataclass(frozen=True)
class VouchIssue:
    """Record that a writer vouched for the issue (:mod:`squadron.domain.vouching`); it stays vouched."""

    repo_id: int
    number: int
    #: Who vouched and how (a writer's login, or the vouched issue an agent's blocker issue came from).
    by: str
    occurred_at: datetime
    kind: Literal["vouch_issue"] = "vouch_issue"


@dataclass(frozen=True)
class AddBlocker:
    """Store ``issue`` blocked by ``blocker`` (both directions), only while ``blocker`` is not closed."""

    repo_id: int
    issue: int
    blocker: int
    agent: AgentWrite | None = None
    kind: Literal["add_blocker"] = "add_blocker"


@dataclass(frozen=True)
class RemoveBlocker:
    repo_id: int
    issue: int
    blocker: int
    agent: AgentWrite | None = None
    kind: Literal["remove_blocker"] = "remove_blocker"


@dataclass(frozen=True)
class LinkPullRequest:
    repo_id: int
    pr_number: int
    issue_number: int
    agent: AgentWrite | None = None
    kind: Literal["link_pull_request"] = "link_pull_request"


@dataclass(frozen=True)
class DeliverInbox:
    item: InboxItem
    kind: Literal["deliver_inbox"] = "deliver_inbox"


@dataclass(frozen=True)
class RecordReview:
    repo_id: int
    pr_number: int
    reviewer: str
    state: str
    commit_id: str | None
    review_id: int
    kind: Literal["record_review"] = "record_review"


@dataclass(frozen=True)
class LaunchAgent:
    """Start a task for the agent (``start``) or resume its session (``wake``).

    ``token`` is unique per decision (agent id and record version) and is the
    ECS client token, so a retried launch never starts a second task.
    """

    agent_id: str
    purpose: Literal["start", "wake"]
    reason: str
    token: str
    kind: Literal["launch_agent"] = "launch_agent"


@dataclass(frozen=True)
class StopAgentTask:
    agent_id: str
    task_arn: str
    reason: str
    kind: Literal["stop_agent_task"] = "stop_agent_task"


@dataclass(frozen=True)
class PostComment:
    repo_full_name: str
    installation_id: int | None
    number: int
    body: str
    author: str
    kind: Literal["post_comment"] = "post_comment"


@dataclass(frozen=True)
class CloseIssue:
    repo_full_name: str
    installation_id: int | None
    number: int
    reason: str
    kind: Literal["close_issue"] = "close_issue"


@dataclass(frozen=True)
class AddLabels:
    repo_full_name: str
    installation_id: int | None
    number: int
    labels: tuple[str, ...]
    kind: Literal["add_labels"] = "add_labels"


@dataclass(frozen=True)
class RemoveLabel:
    """Take a label off an issue or pull request (a pipeline's ``remove_label``); one already
    gone is no error, so a retry is harmless."""

    repo_full_name: str
    installation_id: int | None
    number: int
    label: str
    kind: Literal["remove_label"] = "remove_label"


@dataclass(frozen=True)
class AssignIssue:
    """Assign people to an issue or pull request (a pipeline's human stage, ``auto_assign``)."""

    repo_full_name: str
    installation_id: int | None
    number: int
    logins: tuple[str, ...]
    kind: Literal["assign_issue"] = "assign_issue"


@dataclass(frozen=True)
class CreateIssue:
    """A new issue written by the framework (a needs-human issue)."""

    repo_full_name: str
    installation_id: int | None
    title: str
    body: str
    labels: tuple[str, ...] = ()
    assignees: tuple[str, ...] = ()
    kind: Literal["create_issue"] = "create_issue"


@dataclass(frozen=True)
class EvaluateMerge:
    """Judge a pull request against its approval flow: post squadron/merge, merge when allowed."""

    repo_full_name: str
    installation_id: int | None
    pr_number: int
    #: The dev role whose agent wrote the PR (never counted as its own reviewer).
    author_role: str | None = None
    #: That agent's issue (a conflict is reported to it), and the delivery that asked for the
    #: judgement (a conflict report is one per judgement: a replay repeats its id).
    issue_number: int | None = None
    cause: str = ""
    #: A merge group GitHub's queue asks checks of for this PR (its head sha): Squadron's
    #: statuses go there too.
    merge_group: str | None = None
    #: GitHub's merge queue merged the PR: what follows a merge (the branch deletion) follows.
    queue_merged: bool = False
    kind: Literal["evaluate_merge"] = "evaluate_merge"


@dataclass(frozen=True)
class FileBlockerIssue:
    """Open an issue for humans and put ``agent_id`` to sleep on it (its number is GitHub's)."""

    repo_full_name: str
    installation_id: int | None
    agent_id: str
    launch_token: str
    issue_number: int
    title: str
    body: str
    labels: tuple[str, ...] = ()
    assignees: tuple[str, ...] = ()
    kind: Literal["file_blocker_issue"] = "file_blocker_issue"


@dataclass(frozen=True)
class OpenRetrospective:
    """Hold a retrospective: its figures computed from the repository's history over the
    period, an issue opened with them (once: keyed), the period recorded, and the issue
    assigned to the App so the retrospective role's agent starts on it."""

    repo_full_name: str
    installation_id: int | None
    repo_id: int
    trigger: str
    window_end: datetime
    #: None: the previous retrospective's end, else ``window_days`` before the end.
    window_start: datetime | None = None
    window_days: int = 7
    milestone_number: int | None = None
    milestone_title: str | None = None
    kind: Literal["open_retrospective"] = "open_retrospective"


@dataclass(frozen=True)
class ConfirmMemory:
    """A person confirmed facts of the repository's memory (:mod:`squadron.domain.memory`):
    those of ``fact_ids`` that ``authors`` proposed. Idempotent: a confirmed fact stays as it is."""

    repo_id: int
    fact_ids: tuple[str, ...]
    #: The agents whose proposals it confirms (empty: any agent's, a person named the facts).
    authors: tuple[str, ...]
    by: str
    how: str
    expiry_days: int = 28
    kind: Literal["confirm_memory"] = "confirm_memory"


@dataclass(frozen=True)
class StartPipelineRun:
    """Start a run of a repository's pipeline (docs/pipelines.md): its state machine's published
    version (published first if it is not yet), under ``name``, deterministic from the delivery,
    the pipeline and the issue, so a retry or a redelivery is the same run; ``data`` is the
    trigger's (the run's ``trigger`` namespace)."""

    repo_id: int
    repo_full_name: str
    installation_id: int | None
    #: The run's issue or pull request (None: a repository-wide run).
    issue_number: int | None
    pipeline: str
    name: str
    data: dict[str, Any]
    kind: Literal["start_pipeline_run"] = "start_pipeline_run"


@dataclass(frozen=True)
class SteerPipelineRuns:
    """Carry out the ``on_events`` handler of ``event`` on each running run of the issue or pull
    request ``number`` (docs/pipelines.md, "Reactive handlers at run time"): what each run does is
    :func:`squadron.domain.pipelines.reactions.reaction`, every step under this effect's key (a
    restarted run's name is the delivery's, so a retry starts it once). ``by``: the writer who
    vouched for the event."""

    repo_id: int
    repo_full_name: str
    installation_id: int | None
    number: int | None
    event: str
    delivery: str
    by: str
    #: The event's facts, as a run it started would get them (``trigger_data`` of the webhook):
    #: what a run it restarts holds as ``trigger`` (its new head), laid over the run's own.
    trigger: dict[str, Any] = field(default_factory=dict)
    kind: Literal["steer_pipeline_runs"] = "steer_pipeline_runs"


@dataclass(frozen=True)
class ApproveChangeSet:
    """``login``'s ``/squadron change-set approve <set_id>`` comment on issue ``number`` of
    ``repo_full_name`` (docs/change-sets.md): carried out by
    :class:`squadron.shell.change_set_commands.ChangeSetCommands`, which asks GitHub what
    ``login`` may write, stores the approval and answers on the issue once, under this effect's
    key. ``answer_refusal``: a refusal is answered too (``login`` can write the issue's
    repository); anyone else's refused command is silent, as every stranger's input is."""

    repo_id: int
    repo_full_name: str
    installation_id: int
    number: int
    set_id: str
    login: str
    delivery: str
    answer_refusal: bool
    kind: Literal["approve_change_set"] = "approve_change_set"


@dataclass(frozen=True)
class Discard:
    """Nothing to do; ``reason`` is logged and counted.

    ``rule`` names the authority rule that refused a human input
    (:class:`squadron.domain.authority.Rule`), counted by rule.
    """

    reason: str
    kind: Literal["discard"] = "discard"
    rule: str | None = None


Effect = (
    PutAgent
    | SetIssueState
    | SetIssueAssignment
    | VouchIssue
    | AddBlocker
    | RemoveBlocker
    | LinkPullRequest
    | DeliverInbox
    | RecordReview
    | LaunchAgent
    | StopAgentTask
    | PostComment
    | CloseIssue
    | AddLabels
    | RemoveLabel
    | AssignIssue
    | CreateIssue
    | EvaluateMerge
    | FileBlockerIssue
    | ConfirmMemory
    | OpenRetrospective
    | StartPipelineRun
    | SteerPipelineRuns
    | ApproveChangeSet
    | Discard
)

GITHUB_EFFECTS = (PostComment, CloseIssue, AddLabels, RemoveLabel, AssignIssue, CreateIssue)
TASK_EFFECTS = (LaunchAgent, StopAgentTask)

#: News of the event itself: idempotent, guarded by GitHub's time or id, applied before the commit.
Fact = SetIssueState | SetIssueAssignment | VouchIssue | RecordReview
#: The registry writes of a decision: committed together with its record (an inbox item's key
#: is its delivery's, so storing it in the commit is storing it once).
Write = PutAgent | AddBlocker | RemoveBlocker | LinkPullRequest | DeliverInbox
#: What a decision does outside its commit, carried out from the committed record in this order.
Outside = (
    PostComment
    | CloseIssue
    | AddLabels
    | RemoveLabel
    | AssignIssue
    | CreateIssue
    | LaunchAgent
    | StopAgentTask
    | EvaluateMerge
    | FileBlockerIssue
    | ConfirmMemory
    | OpenRetrospective
    | StartPipelineRun
    | SteerPipelineRuns
    | ApproveChangeSet
)


def _outside_rank(effect: Outside) -> int:
    """GitHub first, then tasks (an agent woken finds its inbox committed), then the merge gate."""
    if isinstance(effect, GITHUB_EFFECTS):
        return 0
    if isinstance(effect, TASK_EFFECTS):
        return 1
    return 2


@dataclass(frozen=True)
class Split:
    """A decision's effects by when they are carried out (see the module's docstring)."""

    facts: tuple[Fact, ...]
    writes: tuple[Write, ...]
    outside: tuple[Outside, ...]
    discards: tuple[Discard, ...]


def split_decision(effects: Iterable[Effect]) -> Split:
    """Sort ``effects`` into facts, the commit's writes, the outbox (in order) and discards.

    Exhaustive: an effect type that is none of these fails type checking here.
    """
    facts: list[Fact] = []
    writes: list[Write] = []
    outside: list[Outside] = []
    discards: list[Discard] = []
    for effect in effects:
        match effect:
            case SetIssueState() | SetIssueAssignment() | VouchIssue() | RecordReview():
                facts.append(effect)
            case PutAgent() | AddBlocker() | RemoveBlocker() | LinkPullRequest() | DeliverInbox():
                writes.append(effect)
            case (
                PostComment()
                | CloseIssue()
                | AddLabels()
                | RemoveLabel()
                | AssignIssue()
                | CreateIssue()
                | LaunchAgent()
                | StopAgentTask()
                | EvaluateMerge()
                | FileBlockerIssue()
                | ConfirmMemory()
                | OpenRetrospective()
                | StartPipelineRun()
                | SteerPipelineRuns()
                | ApproveChangeSet()
            ):
                outside.append(effect)
            case Discard():
                discards.append(effect)
            case _:  # pragma: no cover - exhaustiveness: mypy reports an unhandled effect type
                assert_never(effect)
    ordered = sorted(outside, key=_outside_rank)
    return Split(tuple(facts), tuple(writes), tuple(ordered), tuple(discards))


def apply_order(effects: list[Effect]) -> list[Effect]:
    """The order a decision's effects take effect: facts, the commit's writes, the outbox, discards."""
    split = split_decision(effects)
    return [*split.facts, *split.writes, *split.outside, *split.discards]


_OUTSIDE = TypeAdapter(list[Annotated[Outside, Field(discriminator="kind")]])


@dataclass(frozen=True)
class Decision:
    """A committed decision: the delivery it answers and what it does outside the registry.

    ``key`` is the delivery id (one decision per delivery; a paused repository's withheld
    routing has its own, :func:`decision_key`). ``done`` once every outside effect was
    carried out; until then a retry of the delivery, or the reconciler's sweep, carries them
    out again, each under its :func:`effect_key`.
    """

    key: str
    decided_at: datetime
    outside: tuple[Outside, ...]
    done: bool = False
    #: The repository, for the reconciler's sweep (a :class:`FinishDecision` names it).
    installation_id: int | None = None
    repo_full_name: str = ""
    repo_id: int | None = None

    def dump_outside(self) -> bytes:
        return _OUTSIDE.dump_json(list(self.outside))

    @staticmethod
    def load_outside(data: bytes | str) -> tuple[Outside, ...]:
        return tuple(_OUTSIDE.validate_json(data))


def decision_key(delivery_id: str, *, paused: bool = False) -> str:
    """The decision record's key: the delivery, or its routing while its repository was paused."""
    return f"{delivery_id}#paused" if paused else delivery_id


def effect_key(decision: str, index: int) -> str:
    """The idempotency key of the ``index``-th outside effect of ``decision``.

    A hash: it names the effect without revealing the delivery id, and nobody who only sees
    public facts (an issue number, a launch count) can predict it.
    """
    return hashlib.sha256(f"{decision}\x00{index}".encode()).hexdigest()[:24]


#: The hidden line that marks what an effect created on GitHub (a comment, an issue).
EFFECT_MARKER = "<!-- squadron:effect {key} -->"


def effect_marker(key: str) -> str:
    return EFFECT_MARKER.format(key=key)


def marked(body: str, key: str) -> str:
    """``body`` with the effect's hidden marker as its last line."""
    return f"{body}\n\n{effect_marker(key)}"


def has_marker(body: object, key: str) -> bool:
    return isinstance(body, str) and effect_marker(key) in body


def written_by(item: Mapping[str, Any], login: str | None) -> bool:
    """Whether GitHub says ``login`` wrote ``item`` (an issue, a comment, a review); with no
    login known, whether a bot did."""
    user = item.get("user")
    if not isinstance(user, Mapping):
        return False
    return user.get("login") == login if login is not None else user.get("type") == "Bot"


def marked_item(items: Iterable[Mapping[str, Any]], key: str, login: str | None) -> Mapping[str, Any] | None:
    """The first of ``items`` that ``login`` wrote and whose body carries ``key``'s marker: what
    an earlier attempt of a keyed effect created. Only the App's own count, so a stranger who
    copies a marker suppresses nothing."""
    return next((i for i in items if written_by(i, login) and has_marker(i.get("body"), key)), None)


def agent_writes(effects: Iterable[Effect]) -> Iterator[AgentWrite]:
    """Every agent record the effects write, in order."""
    for effect in effects:
        if isinstance(effect, PutAgent):
            yield effect.write
        elif isinstance(effect, AddBlocker | RemoveBlocker | LinkPullRequest) and effect.agent is not None:
            yield effect.agent


def status_changes(before: Iterable[AgentRecord], effects: Iterable[Effect]) -> tuple[str, ...]:
    """``"OLD>NEW"`` for each agent status the effects change (``NEW`` for an agent they create).

    ``before`` are the records the decision was made on (the snapshot's agents).
    """
    status: dict[str, str] = {agent.agent_id: agent.status.value for agent in before}
    changes: list[str] = []
    for write in agent_writes(effects):
        old = status.get(write.record.agent_id, "NEW")
        new = write.record.status.value
        if old != new:
            changes.append(f"{old}>{new}")
        status[write.record.agent_id] = new
    return tuple(changes)


def commit_agents(writes: Iterable[Effect]) -> list[AgentWrite]:
    """One write per agent a commit stores: its first expected version, its last record.

    A decision that writes one agent twice (the second expecting the first's version)
    commits it once, conditional on the version the decision read.
    """
    expected: dict[str, int | None] = {}
    last: dict[str, AgentRecord] = {}
    for write in agent_writes(writes):
        expected.setdefault(write.record.agent_id, write.expected_version)
        last[write.record.agent_id] = write.record
    return [AgentWrite(record, expected[agent_id]) for agent_id, record in last.items()]
